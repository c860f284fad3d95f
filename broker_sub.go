package stepwise

import (
	"sync"
	"sync/atomic"
)

// subscriber is a live subscriber's queue. Events are appended by the
// broker under the topic's shard lock, in position order, and taken in
// batches by the consumer; the queue grows only as far as the consumer
// lags, so an idle subscriber holds no buffer. A subscriber more than limit
// events behind is marked lagged and receives nothing more: it catches up
// from the store.
type subscriber struct {
	runID  string        // only events of this run, if set
	ready  chan struct{} // signalled when the queue becomes non-empty
	lag    chan struct{} // closed when the subscriber fell behind
	limit  int
	mu     sync.Mutex
	queue  []*Event
	lagged atomic.Bool
}

func newSubscriber(runID string, limit int) *subscriber {
	return &subscriber{runID: runID, ready: make(chan struct{}, 1), lag: make(chan struct{}), limit: limit}
}

// offer queues ev unless the subscriber lags (or starts lagging now). It
// reports whether the queue was empty: the caller must then call wake.
func (s *subscriber) offer(ev *Event) bool {
	if s.lagged.Load() {
		return false
	}
	s.mu.Lock()
	if len(s.queue) >= s.limit {
		s.mu.Unlock()
		s.markLagged()
		return false
	}
	s.queue = append(s.queue, ev)
	wake := len(s.queue) == 1
	s.mu.Unlock()
	return wake
}

// wake signals the consumer that the queue is not empty.
func (s *subscriber) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns the queued events, oldest first, and hands buf (emptied)
// to the queue for reuse: pass the previous batch back once consumed.
func (s *subscriber) take(buf []*Event) []*Event {
	clear(buf)
	s.mu.Lock()
	out := s.queue
	s.queue = buf[:0]
	s.mu.Unlock()
	return out
}

// markLagged switches the subscriber to catch-up from the store; its
// consumer is woken (ready) as well as told (lag).
func (s *subscriber) markLagged() {
	if s.lagged.CompareAndSwap(false, true) {
		close(s.lag)
		s.wake()
	}
}
