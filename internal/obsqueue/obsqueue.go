// Package obsqueue delivers the calls of one observer of the engine in
// order, on the observer's own goroutine, without ever blocking the
// caller: a full queue drops the call (and logs it), a panicking observer
// is logged.
package obsqueue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// StopTimeout bounds Stop: what is queued is delivered for at most this
// long; then the observer's context is cancelled, what is left is dropped
// and logged, and Stop returns at most abandonWait later even if the
// observer ignores its context.
const StopTimeout = 5 * time.Second

// abandonWait is how long Stop waits, past its bound, for the delivery in
// flight to return.
const abandonWait = time.Second

// Queue delivers the values sent to it to its deliver function, one at a
// time, in the order they were sent.
type Queue[T any] struct {
	deliver func(context.Context, T)
	name    string // the observer, in log records
	logger  *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc

	mu      sync.RWMutex // held for reading while sending, for writing by Stop
	closed  bool
	ch      chan item[T]
	done    chan struct{}
	dropped atomic.Int64

	stopBound time.Duration // StopTimeout unless SetStopBound
	abandon   atomic.Bool   // Stop's bound passed: drop what is left
	abandoned atomic.Int64  // values dropped by Stop
}

// item is one queued value, or a flush marker.
type item[T any] struct {
	v       T
	flushed chan struct{}
}

// New returns a running queue of size values for observer (named in log
// records by its type) that delivers with deliver.
func New[T any](size int, logger *slog.Logger, observer any, deliver func(context.Context, T)) *Queue[T] {
	q := &Queue[T]{deliver: deliver, name: fmt.Sprintf("%T", observer), logger: logger, ch: make(chan item[T], size), done: make(chan struct{}), stopBound: StopTimeout}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	go q.loop()
	return q
}

// Send queues v without blocking; a full queue drops it.
func (q *Queue[T]) Send(v T) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return
	}
	select {
	case q.ch <- item[T]{v: v}:
	default:
		if n := q.dropped.Add(1); n&(n-1) == 0 {
			q.logger.Warn("stepwise: observer queue full, observation dropped", "observer", q.name, "dropped", n)
		}
	}
}

// Dropped is the number of values dropped because the queue was full.
func (q *Queue[T]) Dropped() int64 { return q.dropped.Load() }

// Flush waits until what was sent before it is delivered, or ctx ends.
func (q *Queue[T]) Flush(ctx context.Context) error {
	done := make(chan struct{})
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return nil
	}
	select {
	case q.ch <- item[T]{flushed: done}:
	case <-ctx.Done():
		q.mu.RUnlock()
		return ctx.Err()
	}
	q.mu.RUnlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetStopBound replaces StopTimeout for this queue (tests); call it before
// Stop.
func (q *Queue[T]) SetStopBound(d time.Duration) { q.stopBound = d }

// Stop delivers what is queued, then stops the queue; later sends are
// dropped. It is bounded: past the queue's stop bound (StopTimeout) it
// cancels the observer's context, drops what is left and logs how much.
func (q *Queue[T]) Stop() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	bound := time.NewTimer(q.stopBound)
	defer bound.Stop()
	select {
	case <-q.done:
		q.cancel()
		return
	case <-bound.C:
	}
	q.abandon.Store(true)
	q.cancel()
	grace := time.NewTimer(abandonWait)
	defer grace.Stop()
	returned := true
	select {
	case <-q.done:
	case <-grace.C:
		returned = false // the observer ignores its context; the loop drops the rest once it returns
	}
	q.logger.Warn("stepwise: observer stopped before delivering everything", "observer", q.name,
		"bound", q.stopBound, "dropped", q.abandoned.Load()+int64(len(q.ch)), "delivery_returned", returned)
}

func (q *Queue[T]) loop() {
	defer close(q.done)
	for it := range q.ch {
		if q.abandon.Load() {
			if it.flushed != nil {
				close(it.flushed)
			} else {
				q.abandoned.Add(1)
			}
			continue
		}
		q.call(it)
	}
}

// call makes one delivery; a panicking observer is logged, not fatal.
func (q *Queue[T]) call(it item[T]) {
	defer func() {
		if r := recover(); r != nil {
			q.logger.Error("stepwise: observer panicked", "observer", q.name, "panic", r)
		}
	}()
	if it.flushed != nil {
		close(it.flushed)
		return
	}
	q.deliver(q.ctx, it.v)
}
