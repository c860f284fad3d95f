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
// Steps are copied in and out, so callers can never mutate a stored row
// through a pointer: a stored step is packed (its numbers in place, its
// strings, raw JSON, tool calls and a flat metadata map in one byte slice
// of a session's arena, its kind and status as codes: a row with one
// pointer, so the garbage collector has little to follow in a store that
// keeps every step; what few steps have besides, a nested metadata map, a
// vector or progress, is kept beside the row), and a read unpacks a deep copy as
// rules.CloneStep makes one, whose strings share the immutable packed
// bytes. Steps are normalized on the way in (rules.NormalizeStep) so that
// values round-trip exactly as they would through a database (durations
// in whole microseconds, times in UTC, metadata numbers as float64).
//
// Guarantees: none beyond the process. Nothing survives Close or a crash.
//
//	st := memory.New()
//	defer st.Close()
//	sess, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"})
package memory
