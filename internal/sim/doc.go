// Package sim is a deterministic simulation of Stepwise: engines,
// executors (the agents' tools and model), stream subscribers and a human
// answering approvals, all in one process over one memory store, each
// engine behind its own fault store (store/faultstore). A seed fixes the
// whole environment: every delay of a tool or a model call, when a human
// answers and through which engine, when an engine crashes (its store cut
// off, its streams dropped) and whether its process is gone at once or its
// leases must lapse, where a stream reconnects, and the fault schedules.
//
// Run it inside a testing/synctest bubble: every clock the engine reads
// (leases, heartbeats, polls, step timeouts, retries) is then the bubble's
// fake clock, which only moves when every goroutine of the simulation is
// blocked, so a minute of simulated time costs what its work costs and a
// seed gives one run.
//
//	synctest.Test(t, func(t *testing.T) {
//		res, err := sim.Run(t.Context(), sim.Config{Seed: 42, Faults: true})
//		…
//	})
//
// Run checks every invariant and returns the first broken one as an
// error: sequences gap-free, each step committed once, at most one
// unfinished run per session (sampled all along), each stream delivered
// every committed step of its run exactly once and in order, no tool
// executed after its result committed, every run completed, and every
// session's transcript equal to the one of a run without faults or
// crashes (Reference).
package sim
