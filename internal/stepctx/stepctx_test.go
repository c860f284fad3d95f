package stepctx

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ErrStepTimeout stands for the cause the engine gives a step's timeout.
var ErrStepTimeout = errors.New("stepwise: step timed out")

type deadlineKey struct{}

// ctxAnswers is what a handler can observe of a context.
type ctxAnswers struct {
	err, cause           error
	done, hasDeadline    bool
	value                any
	childErr, childCause error // of a context derived from it now
	valueCause           error // context.Cause through a WithValue
	afterFunc            bool  // context.AfterFunc ran (waited for when done)
}

// answersOf reads them; causeFirst asks context.Cause (through a value
// context) before anything else, so that no other answer makes the context.
func answersOf(t *testing.T, ctx context.Context, causeFirst bool) ctxAnswers {
	t.Helper()
	var a ctxAnswers
	if causeFirst {
		a.valueCause = context.Cause(context.WithValue(ctx, deadlineKey{}, 2))
	}
	a.err, a.cause, a.value = ctx.Err(), context.Cause(ctx), ctx.Value(deadlineKey{})
	select {
	case <-ctx.Done():
		a.done = true
	default:
	}
	_, a.hasDeadline = ctx.Deadline()
	child, cancel := context.WithCancel(ctx)
	a.childErr, a.childCause = child.Err(), context.Cause(child)
	cancel()
	if !causeFirst {
		a.valueCause = context.Cause(context.WithValue(ctx, deadlineKey{}, 2))
	}
	ran := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(ran) })
	if a.done {
		select {
		case <-ran:
			a.afterFunc = true
		case <-time.After(5 * time.Second):
		}
	}
	stop()
	return a
}

// TestDeadlineCtxAnswersAsWithTimeoutCause runs each scenario twice, on
// context.WithTimeoutCause and on Context, and compares every
// answer a handler could read (errors, causes, Done, the deadline, values,
// derived contexts and AfterFunc), before and after each event.
func TestDeadlineCtxAnswersAsWithTimeoutCause(t *testing.T) {
	errParent := errors.New("parent's cause")
	type env struct {
		ctx          context.Context
		end          func()
		cancelParent func()
	}
	scenarios := []struct {
		name       string
		timeout    time.Duration
		parent     time.Duration // a deadline of the parent's own (0: none)
		run        func(t *testing.T, e env, look func(string))
		causeFirst bool
	}{
		{"live then ended", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			look("live")
			e.end()
			look("ended")
			e.cancelParent()
			look("parent cancelled after")
		}, false},
		{"ended untouched", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			e.end()
			e.cancelParent()
			look("ended")
		}, false},
		{"parent cancelled untouched", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			e.cancelParent()
			look("parent cancelled")
			e.end()
			look("ended")
		}, false},
		{"parent cancelled while waited on", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			done := e.ctx.Done()
			e.cancelParent()
			<-done
			look("parent cancelled")
		}, false},
		{"parent cancelled then ended untouched", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			e.cancelParent()
			e.end()
			look("ended")
		}, false},
		{"deadline passed untouched", 2 * time.Millisecond, 0, func(t *testing.T, e env, look func(string)) {
			time.Sleep(20 * time.Millisecond)
			look("timed out")
			e.end()
			look("ended")
		}, false},
		{"deadline passed untouched, cause first", 2 * time.Millisecond, 0, func(t *testing.T, e env, look func(string)) {
			time.Sleep(20 * time.Millisecond)
			look("timed out")
		}, true},
		{"parent cancelled untouched, cause first", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			e.cancelParent()
			look("parent cancelled")
		}, true},
		{"ended untouched, cause first", time.Hour, 0, func(t *testing.T, e env, look func(string)) {
			e.end()
			look("ended")
		}, true},
		{"deadline passed then ended untouched", 2 * time.Millisecond, 0, func(t *testing.T, e env, look func(string)) {
			time.Sleep(20 * time.Millisecond)
			e.end()
			e.cancelParent()
			look("ended")
		}, false},
		{"deadline passed while waited on", 2 * time.Millisecond, 0, func(t *testing.T, e env, look func(string)) {
			<-e.ctx.Done()
			look("timed out")
		}, false},
		{"derived before the deadline", 2 * time.Millisecond, 0, func(t *testing.T, e env, look func(string)) {
			child, cancel := context.WithCancel(e.ctx)
			defer cancel()
			<-child.Done()
			if err, cause := child.Err(), context.Cause(child); err != context.DeadlineExceeded || cause != ErrStepTimeout {
				t.Errorf("derived: %v, %v", err, cause)
			}
			look("timed out")
		}, false},
		{"parent's deadline first", time.Hour, 2 * time.Millisecond, func(t *testing.T, e env, look func(string)) {
			look("live")
			time.Sleep(20 * time.Millisecond)
			look("parent timed out")
		}, false},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var got [2][]ctxAnswers
			var offsets [2]time.Duration
			for i, mine := range []bool{false, true} {
				base := context.WithValue(context.Background(), deadlineKey{}, 1)
				var stopDeadline context.CancelFunc = func() {}
				if sc.parent > 0 {
					base, stopDeadline = context.WithTimeoutCause(base, sc.parent, errParent)
				}
				parent, cancelParent := context.WithCancelCause(base)
				e := env{cancelParent: func() { cancelParent(errParent) }}
				start := time.Now()
				if mine {
					d := new(Context)
					d.Init(parent, time.Time{}, sc.timeout, ErrStepTimeout)
					e.ctx, e.end = d, d.End
				} else {
					e.ctx, e.end = context.WithTimeoutCause(parent, sc.timeout, ErrStepTimeout)
				}
				dl, _ := e.ctx.Deadline()
				offsets[i] = dl.Sub(start)
				sc.run(t, e, func(string) { got[i] = append(got[i], answersOf(t, e.ctx, sc.causeFirst)) })
				e.end()
				e.cancelParent()
				stopDeadline()
				if pd, ok := parent.Deadline(); ok && pd != dl {
					t.Errorf("deadline %v, the parent's %v (earlier) wanted", dl, pd)
				}
			}
			if len(got[0]) != len(got[1]) {
				t.Fatalf("%d looks and %d", len(got[0]), len(got[1]))
			}
			for j := range got[0] {
				if got[0][j] != got[1][j] {
					t.Errorf("look %d: WithTimeoutCause answers %+v\nstepctx.Context %+v", j, got[0][j], got[1][j])
				}
			}
			if sc.parent == 0 {
				// Both deadlines are the creation time plus the timeout.
				for i, off := range offsets {
					if off < sc.timeout || off > sc.timeout+time.Second {
						t.Errorf("binary %d: deadline %v after its creation, want %v", i, off, sc.timeout)
					}
				}
			}
		})
	}
}

// TestStepTimeoutWithoutDone checks that a handler which never waits on
// Done sees the deadline's error and cause through a derived value context
// (what call reads to report ErrStepTimeout).
func TestStepTimeoutWithoutDone(t *testing.T) {
	d := new(Context)
	d.Init(context.Background(), time.Time{}, time.Millisecond, ErrStepTimeout)
	defer d.End()
	ctx := context.WithValue(d, deadlineKey{}, 1)
	time.Sleep(10 * time.Millisecond)
	if cause := context.Cause(ctx); !errors.Is(cause, ErrStepTimeout) { // first: nothing made it yet
		t.Fatalf("Cause %v, want ErrStepTimeout", cause)
	}
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err %v, want DeadlineExceeded", err)
	}
}
