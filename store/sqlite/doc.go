// Package sqlite is the embedded store.Store: one SQLite file in WAL mode,
// via the pure-Go driver modernc.org/sqlite (no cgo).
//
//	st, err := sqlite.Open(ctx, sqlite.Config{Path: "stepwise.db"})
//	if err != nil {
//		return err // errors.Is(err, store.ErrLocked) when another process holds it
//	}
//	defer st.Close()
//
// # Durability
//
// A call that returned nil is committed. With Synchronous "NORMAL" (the
// default) in WAL mode a committed step survives a crash of the process; on
// power loss or an OS crash the last transactions may roll back, but the
// database is never corrupted. With "FULL" a committed step also survives
// power loss, at the cost of one fsync per group commit.
//
// # Writes: one writer, group commit
//
// All writes go through one writer goroutine and one connection. The
// goroutine takes every pending request (up to 256), runs them in a single
// transaction with a SAVEPOINT per request — a request that fails (a
// conflict, a lost lease) rolls back only itself — commits once, and
// answers each caller. Sequences are allocated from sessions.last_seq inside
// that transaction, so they are gap-free without retries, and StepAppend
// with run updates, StepResolve and RunClaim are atomic and serialized.
// A request whose context ends before the writer reaches it is skipped; once
// started it always finishes, so an error always means "not written".
// SQLite checkpoints the WAL into the database file every 1000 pages, on the
// writer; Close checkpoints and truncates it.
//
// # Reads
//
// Reads use a separate pool of query-only connections (Config.Readers) and
// run concurrently with the writer; a read that needs several queries
// (a fork's lineage, then its segments) runs in one read transaction and so
// sees one snapshot. A fork stores only (parent_session_id, fork_sequence)
// and its own steps; reads resolve the chain with one recursive query and
// read each stored segment.
//
// # Files and processes
//
// Open takes an exclusive flock on Path+".lock" and writes its pid there; a
// second writer, in another process or this one, fails with an error
// wrapping store.ErrLocked that names the holder. Config.ReadOnly opens take
// no lock. The writer relies on being the only writer of the file: it caches
// the session and run rows it has written. Do not write to an open database
// with other tools. The schema is created and upgraded by embedded goose migrations
// on every writable Open (a no-op when up to date); a file that is not a
// SQLite database, or a database with foreign tables and no Stepwise schema,
// fails with store.ErrCorrupt.
//
// Native errors are mapped in one place: no rows → store.ErrNotFound,
// unique violation → store.ErrConflict, SQLITE_BUSY/LOCKED →
// store.ErrLocked, not a database or malformed → store.ErrCorrupt.
package sqlite
