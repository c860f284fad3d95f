// Package postgres is the scale-out store.Store: PostgreSQL (15 or later)
// through a pgx/v5 connection pool, with the same semantics as store/sqlite
// — the conformance suite store/storetest proves both.
//
//	st, err := postgres.Open(ctx, postgres.Config{
//		DSN:    "postgres://stepwise@db:5432/app?sslmode=verify-full",
//		Schema: "stepwise", // created when missing; default "public"
//	})
//	if err != nil {
//		return err // store.ErrInvalid for a bad Config, a clear error when the server is unreachable
//	}
//	defer st.Close()
//
// # Scale-out
//
// Any number of Stores, in any number of processes and hosts, may share
// one schema: every guarantee below holds across them, because it rests on
// PostgreSQL row locks, not on anything in the process. Runs are leased,
// not owned: RunClaim selects queued runs, and running runs whose lease
// expired, with FOR UPDATE SKIP LOCKED, so instances claim concurrently
// without waiting for each other and never lease one run twice; a lease is
// extended with RunUpdate(LeaseExpires) and every write of a run can be
// fenced by its owner and expected status. A run waiting for human input
// holds no lease and is claimable anywhere once StepResolve requeues it.
// Lease times are the callers' clocks (the Now parameters), so keep the
// instances' clocks in sync. Exclusive reports false: another instance may
// hold any lease.
//
// Notify and Listen (SupportsListenNotify reports true) carry wake-ups
// between instances over LISTEN/NOTIFY — a committed step, a run queued,
// an input answered — so run executors and SSE subscribers on other
// instances react at once instead of polling. They are hints: the store is
// the source of truth, and a woken reader re-reads it. Channels are scoped
// to the schema.
//
// # Guarantees
//
// A call that returned nil is committed (with the server's
// synchronous_commit, by default durable), except a lazy TaskCreate
// (durable with the next synchronous commit; store.TaskCreateParams.Lazy).
// A TaskFinish with Visible commits with synchronous_commit off but
// returns only once a later synchronous commit flushed it (durable.go). A call that failed wrote
// nothing, except when ctx ended or the connection broke during COMMIT,
// where the outcome is unknown: StepAppend is idempotent by step id, so
// retry it.
//
//   - Sequences are gap-free per session under concurrent appends from any
//     number of processes: an append locks its sessions' rows (SELECT … FOR
//     NO KEY UPDATE, in id order), takes last_seq + 1 and writes last_seq
//     back in the same transaction. No retries are involved; appends to one
//     session queue on its row, appends to different sessions run in
//     parallel.
//   - StepAppend is idempotent: a step whose id is stored already is
//     returned as stored. With run updates it is atomic: a lost lease or an
//     unexpected status (store.ErrConflict) writes none of it.
//   - StepResolve is a conditional update under the step's row lock: of
//     concurrent resolutions exactly one wins, the others get
//     store.ErrConflict; with QueueRun, resolutions of one run queue on the
//     run's row so that the last answer requeues it.
//   - Forks are O(1) and read through their lineage with one recursive
//     query; StepTruncate and SessionDelete lock the session and are
//     refused (store.ErrConflict) while a fork depends on the steps.
//
// Transactions are READ COMMITTED with explicit row locks. One that still
// fails with a serialization failure or a deadlock (SQLSTATE 40001, 40P01)
// runs again, up to Config.Retries times, then fails with
// store.ErrConflict. A step append or a run update costs two round trips:
// BEGIN travels with the locking reads, COMMIT with the writes.
//
// # Group commit
//
// StepAppend calls that arrive while another append of the same Store is
// committing wait for it and then commit together, in one transaction of
// the same two round trips: one statement locks all their sessions, one
// reads their step ids, one locks their runs; each append's checks
// (sequence, lease owner, expected status, missing rows) run in arrival
// order on the rows as the appends before it left them, and one that fails
// is left out with its own error, having written nothing; one statement per
// table writes the others (steps, session totals, runs), their
// notifications are sent in the same transaction, and one COMMIT — one WAL
// flush — acknowledges them all. If the server refuses the group's writes
// (a constraint the checks cannot see, such as the one-unfinished-run
// index), nothing was written, and each half runs again, down to the
// culprit alone. At most two groups per Store are in flight; an append
// that finds a free slot commits at once on its own goroutine, so a lone
// run pays nothing for the grouping. Under 100 concurrent runs a transaction
// carries tens of appends: the commit count, and with it the fsyncs and
// the per-statement cost, drops by as much (GroupCommitStats).
//
// # Storage
//
// Open creates Config.Schema when missing, sets search_path to it on every
// connection and runs the embedded goose migrations (version table
// stepwise_schema) under an advisory lock, so concurrent Opens are safe. A
// schema that already holds tables named sessions, steps or runs that
// Stepwise did not create is refused with store.ErrCorrupt, untouched.
//
// A step is stored as its versioned wire JSON (steptype.Step.MarshalJSON)
// in a BYTEA column, beside the columns reads filter on (session,
// sequence, run, kind, status). BYTEA rather than JSONB because the wire
// bytes must come back exactly as written — JSONB reorders keys, drops
// duplicate keys, rewrites numbers and whitespace — and because nothing
// queries inside the body, so parsing it on every append would be wasted
// work; convert_from(body, 'UTF8')::jsonb serves ad-hoc queries. Times are
// BIGINT unix nanoseconds, so Go times round-trip exactly (timestamptz
// keeps microseconds). Ids use the "C" collation: byte order, as in Go.
//
// # Observation data and step vectors
//
// The Store implements the whole of store.Store: besides the step
// log, store.ObservationStore (evals, annotations, blobs stored once by
// SHA-256, attachments, step events whose payloads above
// store.InlinePayloadLimit go out of line to a blob, datasets,
// experiments; migration 00010, tables that mirror store/sqlite's) and
// store.VectorStore (migration 00020). Vectors need no extension: each is
// a bytea of little-endian float32s tagged with its embedder, whose
// dimension vector_embedders fixes (a vector of another length fails with
// store.ErrDimensionMismatch). Searches run on the exact in-process index
// of store/internal/vecindex, as on SQLite; each Store keeps its index
// current across processes by reading only the vectors committed since its
// last search (writes of one embedder are numbered under its row lock, so
// they commit in order) and dropping those of deleted steps (a counter
// bumped by a statement trigger). See vector_index.go and docs/memory.md.
//
// Native errors are mapped in one place: no rows → store.ErrNotFound,
// unique or foreign-key violation → store.ErrConflict, serialization
// failure or deadlock after the retries → store.ErrConflict, a missing
// table or schema (dropped under the store) → store.ErrCorrupt, a failed
// connection → an error that says so.
package postgres
