// Package memory is an in-memory store.Store for tests and examples.
//
// Every method is atomic and linearizable: a StepAppend with run updates, a
// fork, a truncate or a resolve is all-or-nothing exactly like a
// transaction of the SQL drivers. The per-step paths (append, run update,
// claim, resolve, reads of one session or one id) lock only the sessions
// they touch, under a store-wide lock held shared; what reads or writes
// across sessions holds that lock exclusively (see Store). Runs of
// different sessions therefore do not wait on each other, and the checks a
// step makes (one unfinished run per session, closing the waiting steps of
// a finishing run) look at the session's own runs and an index of waiting
// steps, never at the whole store.
// Steps are deep-copied in and out (rules.CloneStep), so callers can never
// mutate a stored row through a pointer, and normalized on the way in
// (rules.NormalizeStep) so that values round-trip exactly as they would
// through a database (durations in whole microseconds, times in UTC,
// metadata numbers as float64).
//
// Guarantees: none beyond the process. Nothing survives Close or a crash.
//
//	st := memory.New()
//	defer st.Close()
//	sess, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"})
package memory
