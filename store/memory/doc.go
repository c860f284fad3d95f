// Package memory is an in-memory store.Store for tests and examples.
//
// Everything lives in maps guarded by one mutex, so every method is atomic
// and linearizable: a StepAppend with run updates, a fork, a truncate or a
// resolve is all-or-nothing exactly like a transaction of the SQL drivers.
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
