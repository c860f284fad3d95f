package broker

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

func sinkEvents(n int) []*steptype.Event {
	evs := make([]*steptype.Event, n)
	for i := range evs {
		evs[i] = &steptype.Event{StepName: fmt.Sprint(i)}
	}
	return evs
}

// TestEventSinkHandsOverWhatPiledUp: the consumer takes every event sent
// since its last call in one batch, in order, and a producer wakes it only
// when it is parked.
func TestEventSinkHandsOverWhatPiledUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSink()
		evs := sinkEvents(100)
		for i := 0; i < len(evs); i += 2 {
			if s.Send(nil, evs[i], evs[i+1]) {
				t.Fatal("a send waited with room")
			}
		}
		if len(s.wake) != 0 {
			t.Fatal("a send woke a consumer that was not parked")
		}
		batch := s.Next(nil)
		if len(batch) != len(evs) {
			t.Fatalf("batch of %d events, want all %d", len(batch), len(evs))
		}
		for i, ev := range batch {
			if ev != evs[i] {
				t.Fatalf("event %d is %s, want %s", i, ev.StepName, evs[i].StepName)
			}
		}
		// Parked on an empty list, the consumer is woken by the next send.
		got := make(chan []*steptype.Event)
		go func() { got <- s.Next(batch) }()
		synctest.Wait() // the consumer is blocked in Next
		if !s.isParked() {
			t.Fatal("a consumer blocked on an empty sink is not parked")
		}
		s.Send(nil, nil, evs[0])
		if b := <-got; len(b) != 1 || b[0] != evs[0] {
			t.Fatalf("after the wake-up got %d events, want 1", len(b))
		}
		if given := batch[:cap(batch)]; given[0] != nil {
			t.Error("a batch given back still holds its events")
		}
		// Closed, the consumer gets what is pending, then the end.
		s.Send(nil, evs[1], evs[2])
		s.Close()
		if b := s.Next(nil); len(b) != 2 {
			t.Fatalf("after close got %d events, want the 2 pending", len(b))
		}
		if b := s.Next(nil); b != nil {
			t.Fatalf("a closed, drained sink gave %d events", len(b))
		}
	})
}

func (s *Sink) isParked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parked
}

// TestEventSinkBound: as with a channel of 256 events, a producer waits
// while sinkBuffer events are not taken by the consumer, pending or in its
// batch, and the one it handles is not counted; it goes on when the
// consumer takes one, and drops its event when its context is done.
func TestEventSinkBound(t *testing.T) {
	s := NewSink()
	evs := sinkEvents(sinkBuffer + 3)
	s.Send(nil, evs[0], nil)
	batch := s.Next(nil)
	s.Took() // the consumer handles evs[0]
	for _, ev := range evs[1 : sinkBuffer+1] {
		if s.Send(nil, ev, nil) {
			t.Fatalf("send %s waited, %d events not taken", ev.StepName, sinkBuffer-1)
		}
	}
	sent := make(chan bool)
	go func() { sent <- s.Send(nil, evs[sinkBuffer+1], nil) }()
	stillWaits := func(when string) {
		t.Helper()
		select {
		case <-sent:
			t.Fatalf("%s: a send with %d events not taken did not wait", when, sinkBuffer)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stillWaits("all pending")
	// Handed over, the batch's events count until the consumer takes them.
	batch = s.Next(batch)
	if len(batch) != sinkBuffer || batch[0] != evs[1] {
		t.Fatalf("batch of %d events, want %d", len(batch), sinkBuffer)
	}
	stillWaits("all in the consumer's batch")
	s.Took()
	if !<-sent {
		t.Error("a send that waited reported it did not")
	}
	// Full again (one pending, sinkBuffer-1 of the batch not taken): a send
	// whose context ends meanwhile gives up and drops its event.
	done := make(chan struct{})
	go func() { sent <- s.Send(done, evs[sinkBuffer+2], nil) }()
	close(done)
	if !<-sent {
		t.Error("a send given up reported it did not wait")
	}
	batch = s.Next(batch)
	if len(batch) != 1 || batch[0] != evs[sinkBuffer+1] {
		t.Fatalf("batch of %d events, want only %s (the given-up event dropped)", len(batch), evs[sinkBuffer+1].StepName)
	}
}

// TestEventSinkPacesWhileEventsFlow: after a batch the consumer waits on
// its own clock, so a send does not wake it and it gets the event at most
// sinkPace later; a wait that ends empty makes the next one a plain park,
// which the first event after the lull ends at once; the end, and a
// producer that must wait for room, wake a paced consumer at once.
func TestEventSinkPacesWhileEventsFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSink()
		evs := sinkEvents(sinkBuffer + 4)
		s.Send(nil, evs[0], nil)
		batch := s.Next(nil)
		next := func() (<-chan []*steptype.Event, time.Time) {
			got := make(chan []*steptype.Event, 1)
			go func() { got <- s.Next(batch) }()
			synctest.Wait()
			return got, time.Now()
		}
		// Flowing: the send leaves the consumer parked; it takes the
		// event when its pace runs out.
		got, sent := next()
		s.Send(nil, evs[1], nil)
		if len(s.wake) != 0 {
			t.Fatal("a send woke a paced consumer")
		}
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a paced consumer returned before its pace ran out")
		default:
		}
		batch = <-got
		if len(batch) != 1 || batch[0] != evs[1] {
			t.Fatalf("paced batch of %d events, want 1", len(batch))
		}
		if d := time.Since(sent); d > sinkPace {
			t.Fatalf("a paced consumer took an event %v after it was sent, bound %v", d, sinkPace)
		}
		// A lull: the paced wait ends empty, the consumer parks plainly and
		// the first event after it wakes the consumer at once.
		got, _ = next()
		time.Sleep(10 * sinkPace)
		synctest.Wait()
		sent = time.Now()
		s.Send(nil, evs[2], nil)
		batch = <-got
		if d := time.Since(sent); len(batch) != 1 || d != 0 {
			t.Fatalf("after a lull got %d events %v after the send, want 1 at once", len(batch), d)
		}
		// Flowing again: a producer that finds no room wakes the consumer.
		got, sent = next()
		for _, ev := range evs[3 : 3+sinkBuffer] {
			s.Send(nil, ev, nil)
		}
		waited := make(chan bool)
		go func() { waited <- s.Send(nil, evs[3+sinkBuffer], nil) }()
		batch = <-got
		if d := time.Since(sent); len(batch) != sinkBuffer || d != 0 {
			t.Fatalf("a full sink gave %d events %v after the sends, want %d at once", len(batch), d, sinkBuffer)
		}
		s.Took()
		if !<-waited {
			t.Fatal("the send into a full sink did not wait")
		}
		for range batch[1:] {
			s.Took()
		}
		// Paced, the consumer learns of the end at once.
		batch = s.Next(batch)
		got, sent = next()
		s.Close()
		if b := <-got; b != nil || time.Since(sent) != 0 {
			t.Fatalf("a paced consumer of a closed sink got %d events after %v, want the end at once", len(b), time.Since(sent))
		}
	})
}
