// Package worker serves an agent's custom steps and tools from worker
// processes in any language (docs/workers.md). A Service registers the
// agents workers declare, turns each step or tool call they serve into a
// task of the store's task table (keyed by the run, the step and the call,
// so a re-execution after a crash finds the same task and its result),
// offers tasks to long-polling workers under a lease with a fencing token,
// and turns a worker's result into what a Go handler would have returned.
// Package server exposes it over HTTP.
package worker
