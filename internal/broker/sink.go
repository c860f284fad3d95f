package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// sinkBuffer is how many events an inline execution may send that its
// consumer has not taken yet, as the buffer of the channel it replaces:
// with the one the consumer is handling, the execution runs at most 257
// events ahead.
const sinkBuffer = 256

// sinkPace is how long a consumer that just took a batch waits on its own
// clock for the next one: while events come faster than this, producers
// append without waking it (a wake-up of a parked goroutine costs the
// producer a futex call and moves the consumer to another core, per
// event), and it takes what piled up at most sinkPace after it was sent.
// A wait that ends empty makes the next one a plain park, which the first
// event wakes at once.
const sinkPace = time.Millisecond

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
	paced   bool              // ... and wakes on its own within sinkPace: no send need wake it
	flowing bool              // the consumer's last wait ended with events: the next one is paced
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
	// pace is the consumer's clock for a paced wait (only it uses it).
	pace *time.Timer
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
			s.unlockWake(true)
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
	s.unlockWake(false)
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

// unlockWake releases the mutex, waking the consumer if it is parked and
// there is something for it that cannot wait for its paced wake-up: the
// end, a producer that must wait for room (force), or a first event.
func (s *Sink) unlockWake(force bool) {
	wake := s.parked && (force || s.closed || len(s.pending) > 0 && !s.paced)
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
	s.unlockWake(false)
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
		s.parked, s.paced = true, s.flowing
		paced := s.paced
		s.mu.Unlock()
		if paced {
			s.pacedWait()
		} else {
			<-s.wake
		}
		s.mu.Lock()
		if s.parked {
			// Not woken: the pace ran out. A send that wakes clears
			// parked and leaves the token, which a later wait takes.
			s.parked = false
			s.flowing = len(s.pending) > 0
		}
	}
	s.flowing = true
	batch := s.pending
	s.pending, s.spare = s.spare, nil
	if s.pending == nil {
		s.pending = make([]*steptype.Event, 0, cap(batch))
	}
	s.out = len(batch)
	s.mu.Unlock()
	return batch
}

// pacedWait waits for a wake-up or for sinkPace, whichever comes first.
func (s *Sink) pacedWait() {
	if s.pace == nil {
		s.pace = time.NewTimer(sinkPace)
	} else {
		s.pace.Reset(sinkPace)
	}
	select {
	case <-s.wake:
		s.pace.Stop()
	case <-s.pace.C:
	}
}
