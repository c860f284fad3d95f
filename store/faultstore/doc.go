// Package faultstore is a store.Store that injects faults into the store
// it wraps, on a seeded schedule: errors before a call reaches the store,
// latency, ambiguous commits (the write commits and the caller sees an
// error), a full disk, failing lease renewals, and lost or delayed
// notifications. Any driver can sit under it.
//
//	st := faultstore.New(sqliteStore, faultstore.Config{Seed: seed, Error: 0.05, Ambiguous: 0.02})
//	eng, _ := stepwise.New(stepwise.Config{Store: st, …})
//	…
//	st.SetEnabled(false) // let the system drain, then check the invariants on the inner store
//
// Whether call n (counted from 1 over the whole store) fails, and how, is a
// function of the seed and n alone, so a schedule replays from its seed as
// far as the order of calls does.
//
// Faults wrap the shared sentinels, as the drivers' own errors do: an
// injected error or ambiguous commit wraps store.ErrUnavailable (and
// ErrInjected), a full disk store.ErrStorageFull. The store's area groups
// beyond the core methods (metrics, observations, checkpoints…) and its
// capabilities are forwarded without faults.
package faultstore
