package stepwise

import (
	"fmt"
	"testing"
	"time"
)

func sinkEvents(n int) []*Event {
	evs := make([]*Event, n)
	for i := range evs {
		evs[i] = &Event{StepName: fmt.Sprint(i)}
	}
	return evs
}

// TestEventSinkHandsOverWhatPiledUp: the consumer takes every event sent
// since its last call in one batch, in order, and a producer wakes it only
// when it is parked.
func TestEventSinkHandsOverWhatPiledUp(t *testing.T) {
	s := newEventSink()
	evs := sinkEvents(100)
	for i := 0; i < len(evs); i += 2 {
		if s.send(nil, evs[i], evs[i+1]) {
			t.Fatal("a send waited with room")
		}
	}
	if len(s.wake) != 0 {
		t.Fatal("a send woke a consumer that was not parked")
	}
	batch := s.next(nil)
	if len(batch) != len(evs) {
		t.Fatalf("batch of %d events, want all %d", len(batch), len(evs))
	}
	for i, ev := range batch {
		if ev != evs[i] {
			t.Fatalf("event %d is %s, want %s", i, ev.StepName, evs[i].StepName)
		}
	}
	// Parked on an empty list, the consumer is woken by the next send.
	got := make(chan []*Event)
	go func() { got <- s.next(batch) }()
	for !s.isParked() {
		time.Sleep(time.Millisecond)
	}
	s.send(nil, nil, evs[0])
	if b := <-got; len(b) != 1 || b[0] != evs[0] {
		t.Fatalf("after the wake-up got %d events, want 1", len(b))
	}
	if given := batch[:cap(batch)]; given[0] != nil {
		t.Error("a batch given back still holds its events")
	}
	// Closed, the consumer gets what is pending, then the end.
	s.send(nil, evs[1], evs[2])
	s.close()
	if b := s.next(nil); len(b) != 2 {
		t.Fatalf("after close got %d events, want the 2 pending", len(b))
	}
	if b := s.next(nil); b != nil {
		t.Fatalf("a closed, drained sink gave %d events", len(b))
	}
}

func (s *eventSink) isParked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parked
}

// TestEventSinkBound: a producer runs at most sinkBound events ahead of the
// consumer, the batch the consumer is handling included, as a channel of
// 256 events and the one received; it goes on when the consumer comes back
// for more, and drops its event when its context is done.
func TestEventSinkBound(t *testing.T) {
	s := newEventSink()
	evs := sinkEvents(sinkBound + 2)
	s.send(nil, evs[0], nil)
	batch := s.next(nil) // the consumer handles evs[0]
	for _, ev := range evs[1:sinkBound] {
		if s.send(nil, ev, nil) {
			t.Fatalf("send %s waited, %d events ahead", ev.StepName, sinkBound-1)
		}
	}
	sent := make(chan bool)
	go func() { sent <- s.send(nil, evs[sinkBound], nil) }()
	select {
	case <-sent:
		t.Fatalf("a send %d events ahead of the consumer did not wait", sinkBound)
	case <-time.After(50 * time.Millisecond):
	}
	batch = s.next(batch)
	if !<-sent {
		t.Error("a send that waited reported it did not")
	}
	if len(batch) != sinkBound-1 || batch[0] != evs[1] {
		t.Fatalf("batch of %d events, want %d", len(batch), sinkBound-1)
	}
	// The batch counts until the consumer comes back (sinkBound-1 events
	// handed over, one pending): a send whose context ends meanwhile gives
	// up and drops its event.
	done := make(chan struct{})
	go func() { sent <- s.send(done, evs[sinkBound+1], nil) }()
	close(done)
	if !<-sent {
		t.Error("a send given up reported it did not wait")
	}
	batch = s.next(batch)
	if len(batch) != 1 || batch[0] != evs[sinkBound] {
		t.Fatalf("batch of %d events, want only %s (the given-up event dropped)", len(batch), evs[sinkBound].StepName)
	}
}
