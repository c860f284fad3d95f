package runexec

import (
	"context"
	"errors"
)

// Errors of a run's execution that package stepwise exports as its own.
var (
	// ErrRunCancelled: the run was cancelled while it executed.
	ErrRunCancelled = errors.New("stepwise: run cancelled")
	// ErrLeaseLost: another owner took the run's lease.
	ErrLeaseLost = errors.New("stepwise: run lease lost to another owner")
)

// Causes of an execution's cancellation that stop it without failing the
// run: the call in flight commits nothing, and the run is handed back to the
// queue to be resumed from its cursor (here, on another instance, or by the
// next `stepwise resume`). Only a per-step timeout or a genuine error of the
// call is ever recorded as a step.
var (
	// ErrDetached: the consumer of an inline execution stopped iterating.
	ErrDetached = errors.New("stepwise: execution detached by its consumer")
	// ErrShutdown: Engine.Stop (a graceful shutdown of the process).
	ErrShutdown = errors.New("stepwise: engine stopping")
	// ErrConsumerGone: the context of an inline execution was cancelled
	// (Ctrl-C or SIGTERM of the CLI, a caller giving up); GoneError wraps
	// the context's cause.
	ErrConsumerGone = errors.New("stepwise: execution context cancelled")
)

// GoneError is ErrConsumerGone with the cause of the consumer's context.
type GoneError struct{ Cause error }

func (g *GoneError) Error() string { return ErrConsumerGone.Error() + ": " + g.Cause.Error() }

// Is reports whether target is ErrConsumerGone.
func (g *GoneError) Is(target error) bool { return target == ErrConsumerGone }

func (g *GoneError) Unwrap() error { return g.Cause }

// HandedBack reports whether err stops an execution without failing its run.
func HandedBack(err error) bool {
	return errors.Is(err, ErrDetached) || errors.Is(err, ErrShutdown) || errors.Is(err, ErrConsumerGone)
}

// Interrupted reports whether the execution itself was stopped (shutdown,
// detach, cancel, lease lost): whatever is in flight then commits nothing.
// A per-step timeout cancels only the step's context, not this one.
func (c *Core) Interrupted() bool { return context.Cause(c.Ctx) != nil }

// Stopped handles an execution that cannot continue: a detached consumer,
// a shutdown or a cancelled consumer context hands the run back to the queue
// (nothing of the step in flight was committed); a cancelled run just stops;
// other errors are returned.
func (c *Core) Stopped(err error) error {
	switch {
	case HandedBack(err):
		c.HandBack()
		var g *GoneError
		if errors.As(err, &g) {
			return g.Cause // the caller cancelled its context: say so
		}
		return nil
	case errors.Is(err, ErrRunCancelled):
		return nil
	}
	return err
}

// Abandon releases the contexts of an execution.
func (c *Core) Abandon() {
	c.Cancel(nil)
	if c.Unwatch != nil {
		c.Unwatch()
	}
}

// LeasedRun is the ID of the run the execution holds the lease of.
func (c *Core) LeasedRun() string { return c.Run.ID }

// Running reports whether the execution has not been stopped.
func (c *Core) Running() bool { return c.Ctx.Err() == nil }

// Stop stops the execution with cause.
func (c *Core) Stop(cause error) { c.Cancel(cause) }
