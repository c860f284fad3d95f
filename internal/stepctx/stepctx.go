package stepctx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Context is the context a step's handler runs under. It answers as
// context.WithTimeoutCause(parent, timeout, ErrStepTimeout) would, but makes
// that context (a cancel context, its entry among the parent's children, a
// timer and its function: four allocations, and stopping them again, about a
// tenth of a step's CPU on the memory store) only when a handler asks for
// what needs it: Done, a context derived from it, or an answer after its
// parent was cancelled or its deadline passed. A handler that reads only
// Err, Deadline and Value, and returns before the deadline (nearly every
// step), costs this one allocation.
//
// Every answer is the standard context's: before it is made, Err is nil
// (neither the parent is cancelled nor the deadline passed: either makes
// it, so that the error, the cause and Done come from it), Deadline is the
// deadline, and Value is the parent's (the standard context adds only its
// own cancel context, under the key context.Cause and derived contexts look
// up after Err or Done, which make it first when it could differ).
// Cancelled before it was made, it answers as a standard context cancelled
// then: context.Canceled, with that cause, its deadline and the parent's
// values.
type Context struct {
	parent   context.Context
	deadline time.Time
	cause    error

	made atomic.Bool // real is set (written under mu before made)
	mu   sync.Mutex
	real context.Context
	stop context.CancelFunc
	// own is true when real was made after a cancel (from Background, not
	// linked to parent): Value asks it first, then the parent.
	own       bool
	cancelled atomic.Bool // cancel ran (set under mu)
}

// Init makes the zero d the step's context (as context.WithTimeoutCause;
// the caller must call end once the handler returns). The timeout counts
// from start, a reading of time.Now the caller has just taken (with its
// monotonic part), or from now when start is zero. A step keeps its
// context in the allocation of its own record (scopedStep, leanStart).
func (d *Context) Init(parent context.Context, start time.Time, timeout time.Duration, cause error) {
	if start.IsZero() {
		start = time.Now()
	}
	d.parent, d.deadline, d.cause = parent, start.Add(timeout), cause
	if cur, ok := parent.Deadline(); ok && cur.Before(d.deadline) {
		// The standard context is the parent's cancel context then:
		// make it now, nothing is saved.
		d.real, d.stop = context.WithDeadlineCause(parent, d.deadline, cause)
		d.made.Store(true)
	}
}

// Due reports whether the context must be made to answer: the parent is
// cancelled or the deadline passed. The deadline holds a monotonic reading,
// so time.Until reads only the monotonic clock (as the standard context's
// timer does), about half the cost of time.Now, which reads the wall clock
// too; it is !time.Now().Before(d.deadline).
func (d *Context) Due() bool {
	return d.parent.Err() != nil || time.Until(d.deadline) <= 0
}

// ctx makes the context (once) and returns it.
func (d *Context) ctx() context.Context {
	if d.made.Load() {
		return d.real
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made.Load() {
		if d.cancelled.Load() {
			// Cancelled while neither the parent was cancelled nor the
			// deadline passed: the standard context's answers since.
			d.real, d.stop = context.WithCancel(context.Background())
			d.stop()
			d.own = true
		} else {
			d.real, d.stop = context.WithDeadlineCause(d.parent, d.deadline, d.cause)
		}
		d.made.Store(true)
	}
	return d.real
}

// End cancels the context (its CancelFunc).
func (d *Context) End() {
	if !d.made.Load() {
		d.mu.Lock()
		if !d.made.Load() && !d.cancelled.Load() && !d.Due() {
			d.cancelled.Store(true)
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
	// Made, or the parent's cancellation or the deadline came first: the
	// standard context keeps that error.
	d.ctx()
	d.stop()
}

func (d *Context) Deadline() (time.Time, bool) {
	if d.made.Load() && !d.own {
		return d.real.Deadline()
	}
	return d.deadline, true
}

func (d *Context) Done() <-chan struct{} { return d.ctx().Done() }

func (d *Context) Err() error {
	if d.made.Load() || d.cancelled.Load() || d.Due() {
		return d.ctx().Err()
	}
	return nil
}

func (d *Context) Value(key any) any {
	// Unmade, the parent's values are the standard context's, but for its
	// own cancel context, which context.Cause and derived contexts look up
	// only after Err or Done made it (TestDeadlineCtxAnswersAsWithTimeoutCause
	// asks Cause first to hold that).
	if d.made.Load() {
		if !d.own {
			return d.real.Value(key)
		}
		if v := d.real.Value(key); v != nil {
			return v // its cancel context: Background holds no value
		}
	}
	return d.parent.Value(key)
}
