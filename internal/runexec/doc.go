// Package runexec is the store-facing half of a run's execution: the run
// row a process keeps in memory while it holds the run's lease, the commit
// of steps together with the run's change in one fenced transaction, the
// publication of the run's events to the session's subscribers and to an
// inline consumer, the run's output, and handing the run back to the queue.
//
// The root package's execution embeds a Core and adds what a user names:
// the agent, its handlers and their scope. Core reaches back into it only
// through Unit (the agent's state reducers and the full conversation).
package runexec
