package broker

import (
	"sync"
	"sync/atomic"

	"github.com/stepwise-run/stepwise/steptype"
)

// sinkBuffer is how many events an inline execution may send that its
// consumer has not taken yet, as the buffer of the channel it replaces:
// with the one the consumer is handling, the execution runs at most 257
// events ahead.
const sinkBuffer = 256

// Sink hands an inline execution's events (sub-agents' included) to
// the consumer of Execute. The producers append to a list under a mutex;
// the consumer takes the whole list at once, so that one lock and at most
// one wake-up serve all the events that piled up while it was busy, where
// a channel took its lock from both sides for every event. A producer wakes
// the consumer only when it is parked on an empty list.
//
// Back-pressure is a channel's: a producer waits while sinkBuffer events
// are not taken yet (pending, or in the consumer's batch before it takes
// them one by one, see took), until the consumer takes one or the
// producer's context is done. Events reach the consumer in the order their
// sends took the mutex.
type Sink struct {
	mu      sync.Mutex
	pending []*steptype.Event // appended by the producers
	spare   []*steptype.Event // the consumer's last batch, cleared, for reuse
	out     int               // events of the consumer's batch
	parked  bool              // the consumer waits on wake for a first event
	closed  bool
	// taken counts the events of the batch the consumer has taken (it
	// writes it without the mutex); waiting is set by a producer that
	// waits for room, so that the consumer's next take makes some.
	taken   atomic.Int64
	waiting atomic.Bool
	// wake carries the one token that unparks the consumer.
	wake chan struct{}
	// room, made by a producer that has to wait, is closed when the
	// consumer takes an event or comes back for more.
	room chan struct{}
}

func NewSink() *Sink {
	return &Sink{pending: make([]*steptype.Event, 0, 16), spare: make([]*steptype.Event, 0, 16), wake: make(chan struct{}, 1)}
}

// Send appends a (if not nil), then b (if not nil), waiting while
// sinkBuffer events are not taken; once done is closed a waiting producer
// drops the rest. It reports whether it waited.
func (s *Sink) Send(done <-chan struct{}, a, b *steptype.Event) (waited bool) {
	s.mu.Lock()
	for _, ev := range [2]*steptype.Event{a, b} {
		if ev == nil {
			continue
		}
		for s.full() {
			// Ask the consumer for room, then look again: a take that did
			// not see the flag counted before this second look.
			s.waiting.Store(true)
			if !s.full() {
				break
			}
			if s.room == nil {
				s.room = make(chan struct{})
			}
			room := s.room
			s.unlockWaking()
			waited = true
			select {
			case <-room:
			case <-done:
				return true
			}
			s.mu.Lock()
		}
		s.pending = append(s.pending, ev)
	}
	s.unlockWaking()
	return waited
}

// full reports whether sinkBuffer events are not taken; the caller holds
// mu. The counter is read only when the events out could fill it.
func (s *Sink) full() bool {
	n := len(s.pending) + s.out
	return n >= sinkBuffer && n-int(s.taken.Load()) >= sinkBuffer
}

// Took tells that the consumer takes the next event of its batch to handle
// it (a channel's receive): a producer that waits for room goes on.
func (s *Sink) Took() {
	s.taken.Add(1)
	if s.waiting.Load() {
		s.mu.Lock()
		s.makeRoom()
		s.mu.Unlock()
	}
}

// makeRoom wakes the producers that wait for room; the caller holds mu.
func (s *Sink) makeRoom() {
	s.waiting.Store(false)
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
}

// unlockWaking releases the mutex, waking the consumer if it is parked and
// there is something for it.
func (s *Sink) unlockWaking() {
	wake := s.parked && (len(s.pending) > 0 || s.closed)
	if wake {
		s.parked = false
	}
	s.mu.Unlock()
	if wake {
		s.wake <- struct{}{} // one token per park: never blocks
	}
}

// Close ends the sequence once the consumer has taken what is pending. No
// send may follow.
func (s *Sink) Close() {
	s.mu.Lock()
	s.closed = true
	s.unlockWaking()
}

// Next gives back the consumer's batch (its events handled) and returns the
// next one, waiting for a first event; nil once the sink is closed and
// drained. The batch returned stays the consumer's until its next call;
// it calls took before it handles each of its events.
func (s *Sink) Next(done []*steptype.Event) []*steptype.Event {
	s.mu.Lock()
	if done != nil {
		clear(done)
		s.spare = done[:0]
	}
	s.out = 0
	s.taken.Store(0)
	s.makeRoom()
	for len(s.pending) == 0 {
		if s.closed {
			s.mu.Unlock()
			return nil
		}
		s.parked = true
		s.mu.Unlock()
		<-s.wake
		s.mu.Lock()
	}
	batch := s.pending
	s.pending, s.spare = s.spare, nil
	if s.pending == nil {
		s.pending = make([]*steptype.Event, 0, cap(batch))
	}
	s.out = len(batch)
	s.mu.Unlock()
	return batch
}
