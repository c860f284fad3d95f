package broker

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stepwise-run/stepwise/steptype"
)

// Subscriber is a live subscriber's queue. Events are appended by the
// Broker under the topic's shard lock, in position order, and taken in
// batches by the consumer; the queue grows only as far as the consumer
// lags, so an idle subscriber holds no buffer. A subscriber more than limit
// events behind is marked lagged and receives nothing more: it catches up
// from the store.
type Subscriber struct {
	runID  string        // only events of this run, if set
	ready  chan struct{} // signalled when the queue becomes non-empty
	lag    chan struct{} // closed when the Subscriber fell behind
	limit  int
	mu     sync.Mutex
	queue  []*steptype.Event
	lagged atomic.Bool

	// Direct delivery (newSubscriber with a direct hook, set before the
	// subscriber is published): the consumer's role is held by the
	// consumer's goroutine whenever it is not waiting (from the start), or
	// by a publisher handing a delta to direct while it waits (deliver).
	direct   func(*steptype.Event) (taken, sent bool)
	consumer sync.Mutex
	idle     bool // the consumer waits with everything sent (under mu)
}

func newSubscriber(runID string, limit int, direct func(*steptype.Event) (taken, sent bool)) *Subscriber {
	s := &Subscriber{runID: runID, ready: make(chan struct{}, 1), lag: make(chan struct{}), limit: limit, direct: direct}
	if direct != nil {
		s.consumer.Lock() // the consumer's until it waits
	}
	return s
}

// offer queues ev unless the subscriber lags (or starts lagging now). It
// reports whether the queue was empty: the caller must then call Wake.
func (s *Subscriber) offer(ev *steptype.Event) bool {
	if s.lagged.Load() {
		return false
	}
	s.mu.Lock()
	if len(s.queue) >= s.limit {
		s.mu.Unlock()
		s.MarkLagged()
		return false
	}
	s.queue = append(s.queue, ev)
	wake := len(s.queue) == 1
	s.mu.Unlock()
	return wake
}

// Wake signals the consumer that the queue is not empty.
func (s *Subscriber) Wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// deliver is wake for a publisher: a lone delta (directable) that finds
// the consumer waiting with everything sent is handed to the consumer's
// direct hook on the publisher's goroutine, which saves the consumer's
// wake-up. Anything
// else, or a consumer busy (its role held), is left queued and the consumer
// woken. An event the hook does not take goes back to the front of the
// queue, and the consumer is woken to yield it; one taken but not sent in
// full (a partial write, an error) wakes the consumer too, which flushes
// before it waits again.
func (s *Subscriber) deliver() {
	if s.direct == nil || !s.consumer.TryLock() {
		s.Wake()
		return
	}
	s.mu.Lock()
	var ev *steptype.Event
	if s.idle && len(s.queue) == 1 && directable(s.queue[0]) {
		ev = s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[:0]
	}
	s.mu.Unlock()
	if ev == nil {
		s.consumer.Unlock()
		s.Wake()
		return
	}
	taken, sent := s.direct(ev)
	if !sent {
		s.mu.Lock()
		if !taken {
			// Offers made meanwhile came after it.
			s.queue = slices.Insert(s.queue, 0, ev)
		}
		s.idle = false // the consumer flushes first
		s.mu.Unlock()
	}
	s.consumer.Unlock()
	if !sent {
		s.Wake()
	}
}

// directable reports whether ev may be handed to a direct hook: a delta,
// which changes nothing of a subscription's state but its position. Only
// deltas: they come alone (a model's pace), while a step's start follows
// the previous step's commit, which wakes the consumer, and the two go out
// in one write when the start waits for it (a hook writes each event it
// takes at once: 10 writes more per run of 16 steps when starts were
// taken too).
func directable(ev *steptype.Event) bool {
	return ev.Type == steptype.EventStepDelta && ev.Step == nil && ev.Run == nil && ev.Progress == nil && ev.Yield == nil && ev.Reset == nil
}

// Wait parks the consumer until it is woken (ready), letting publishers
// deliver directly meanwhile when follow set a direct hook: the consumer's
// role is given up while it waits and taken back before it returns.
func (s *Subscriber) Wait() {
	if s.direct == nil {
		<-s.ready
		return
	}
	s.mu.Lock()
	s.idle = true
	s.mu.Unlock()
	s.consumer.Unlock()
	<-s.ready
	s.consumer.Lock()
	s.mu.Lock()
	s.idle = false
	s.mu.Unlock()
}

// Take returns the queued events, oldest first, and hands buf (emptied)
// to the queue for reuse: pass the previous batch back once consumed.
func (s *Subscriber) Take(buf []*steptype.Event) []*steptype.Event {
	clear(buf)
	s.mu.Lock()
	out := s.queue
	s.queue = buf[:0]
	s.mu.Unlock()
	return out
}

// Ready is signalled when the queue becomes non-empty (and when the
// subscriber lags).
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Lag is closed when the subscriber fell behind.
func (s *Subscriber) Lag() <-chan struct{} { return s.lag }

// Lagged reports whether the subscriber fell behind: it receives nothing
// more and must catch up from the store.
func (s *Subscriber) Lagged() bool { return s.lagged.Load() }

// Idle reports whether the consumer waits with everything sent (for tests).
func (s *Subscriber) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle
}

// MarkLagged switches the subscriber to catch-up from the store; its
// consumer is woken (ready) as well as told (lag).
func (s *Subscriber) MarkLagged() {
	if s.lagged.CompareAndSwap(false, true) {
		close(s.lag)
		s.Wake()
	}
}
