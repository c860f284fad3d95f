package observation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/internal/obsqueue"
	"github.com/stepwise-run/stepwise/steptype"
)

// QueueSize is the buffer of each observer's queue.
const QueueSize = 4096

// State is the observation machinery of one engine.
type State struct {
	logger *slog.Logger
	mu     sync.RWMutex
	masks  []MaskFunc
	queues []*queue
	events atomic.Int32 // queues whose observer wants step events
	any    atomic.Bool  // masks or queues registered
}

// New returns the state of an engine that logs to logger.
func New(logger *slog.Logger) *State { return &State{logger: logger} }

// Any reports whether a mask or an observer is registered.
func (st *State) Any() bool { return st.any.Load() }

// Events reports whether an observer records step events.
func (st *State) Events() bool { return st.events.Load() > 0 }

// Observe registers an observer and returns a function that unregisters it
// after delivering what is already queued.
func (st *State) Observe(o Observer) (stop func()) {
	q := newQueue(o, st.logger)
	st.mu.Lock()
	st.queues = append(st.queues, q)
	st.mu.Unlock()
	if q.ev != nil {
		st.events.Add(1)
	}
	st.any.Store(true)
	return func() {
		st.mu.Lock()
		for i, x := range st.queues {
			if x == q {
				st.queues = append(st.queues[:i:i], st.queues[i+1:]...)
				if q.ev != nil {
					st.events.Add(-1)
				}
				break
			}
		}
		st.mu.Unlock()
		q.Stop()
	}
}

// Mask registers a mask function, applied after the ones registered
// before it.
func (st *State) Mask(fn MaskFunc) {
	st.mu.Lock()
	st.masks = append(st.masks, fn)
	st.mu.Unlock()
	st.any.Store(true)
}

// Flush waits until every observer has handled what was queued before the
// call, or ctx ends.
func (st *State) Flush(ctx context.Context) error {
	st.mu.RLock()
	queues := append([]*queue(nil), st.queues...)
	st.mu.RUnlock()
	for _, q := range queues {
		if err := q.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Stop unregisters every observer after delivering what is queued.
func (st *State) Stop() {
	st.mu.Lock()
	queues := st.queues
	st.queues = nil
	st.mu.Unlock()
	st.events.Store(0)
	for _, q := range queues {
		q.Stop()
	}
}

func (st *State) each(fn func(q *queue)) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, q := range st.queues {
		fn(q)
	}
}

// MaskSteps applies the mask functions to steps about to be committed. A
// panicking mask fails the commit: unmasked content is never persisted.
func (st *State) MaskSteps(steps []*steptype.Step) (err error) {
	st.mu.RLock()
	masks := st.masks
	st.mu.RUnlock()
	if len(masks) == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("stepwise: mask function panicked: %v", r)
		}
	}()
	for _, s := range steps {
		id := *s
		for _, fn := range masks {
			fn(s)
		}
		s.ID, s.SessionID, s.RunID, s.Sequence, s.ParentID = id.ID, id.SessionID, id.RunID, id.Sequence, id.ParentID
		s.Hop, s.Kind, s.Name, s.Status, s.CreatedAt = id.Hop, id.Kind, id.Name, id.Status, id.CreatedAt
	}
	return nil
}

// StepCommitted queues a committed step and its run for the observers. It
// is called inside the session's commit lock: it only queues.
func (st *State) StepCommitted(r *steptype.Run, s *steptype.Step) {
	st.each(func(q *queue) { q.Send(item{run: r, step: s}) })
}

// RunFinished queues a finished run for the observers.
func (st *State) RunFinished(r *steptype.Run) {
	st.each(func(q *queue) { q.Send(item{run: r}) })
}

// Record records ev as an event of the step ref.
func (st *State) Record(ref StepRef, ev *StepEvent) {
	ev.StepRef = ref
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	st.each(func(q *queue) {
		if q.ev != nil {
			q.Send(item{ev: ev})
		}
	})
}

// item is one call queued for an observer.
type item struct {
	run  *steptype.Run
	step *steptype.Step
	ev   *StepEvent
}

// queue delivers the calls of one observer in order, on its own goroutine.
type queue struct {
	*obsqueue.Queue[item]
	ev StepEventObserver // nil when o records no step events
}

func newQueue(o Observer, logger *slog.Logger) *queue {
	q := &queue{}
	q.ev, _ = o.(StepEventObserver)
	q.Queue = obsqueue.New(QueueSize, logger, o, func(ctx context.Context, it item) {
		switch {
		case it.ev != nil:
			q.ev.StepEvent(ctx, it.ev)
		case it.step != nil:
			o.StepCommitted(ctx, it.run, it.step)
		default:
			o.RunFinished(ctx, it.run)
		}
	})
	return q
}

// Dropped is how many calls the observers' full queues dropped.
func (st *State) Dropped() int64 {
	var n int64
	st.each(func(q *queue) { n += q.Dropped() })
	return n
}

// SetStopBound bounds how long stopping each observer's queue waits for it
// to deliver what is queued.
func (st *State) SetStopBound(d time.Duration) {
	st.each(func(q *queue) { q.SetStopBound(d) })
}
