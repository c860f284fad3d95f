package stepwise

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/broker"
)

// SubscribeParams.Direct: a delta published while the stream waits is
// offered to Direct on the publisher's goroutine (it has run when publish
// returns) instead of being yielded; an event Direct does not take is
// yielded, one it took but did not send in full makes the stream flush;
// other events (a step's start too), and deltas that find the consumer
// busy, are yielded. The stream's position follows the events
// Direct took: after a lag, the catch-up from the ring repeats none of
// them.
func TestSubscribeDirectDelta(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEngineWithSession(t, ctx, "s")
	var mu sync.Mutex
	var log []string
	add := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(log, " ")
	}
	// Direct's answer per delta text: "keep" is not taken, "part" is taken
	// but not sent in full, anything else is sent.
	direct := func(ev *Event) (bool, bool) {
		if ev.Delta == nil {
			add("direct:" + string(ev.Type))
			return true, true
		}
		add("direct:" + ev.Delta.Content)
		switch ev.Delta.Content {
		case "keep":
			return false, false
		case "part":
			return true, false
		}
		return true, true
	}
	hold, held := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		flush := func() error { add("flush"); return nil }
		for ev, err := range e.Subscribe(ctx, SubscribeParams{SessionID: "s", Flush: flush, Direct: direct}) {
			if err != nil {
				return // ctx cancelled
			}
			text := string(ev.Type)
			if ev.Delta != nil {
				text = ev.Delta.Content
			}
			add(text)
			if ev.StepName == "hold" {
				close(held)
				<-hold
			}
		}
	}()
	sub := func() *broker.Subscriber {
		for {
			if subs := e.broker.Subscribers("s"); len(subs) == 1 {
				return subs[0]
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitIdle := func() {
		for {
			if sub().Idle() {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	publish := func(typ EventType, text string) {
		ev := &Event{Type: typ, SessionID: "s"}
		switch typ {
		case EventStepDelta:
			ev.Delta = &Delta{Content: text}
		case EventRunStarted:
			ev.Run, ev.StepName = &Run{ID: "r"}, text
		}
		e.broker.Publish(ev)
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.HasSuffix(logged(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("log %s, want it to end with %q", logged(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	step := func(typ EventType, text, want string) {
		t.Helper()
		waitIdle()
		publish(typ, text)
		if typ == EventStepDelta {
			// Direct ran on this goroutine: it is in the log already.
			if got := logged(); !strings.Contains(got, "direct:"+text) {
				t.Fatalf("after publishing %s: %s", text, got)
			}
		}
		waitFor(want)
	}
	step(EventStepDelta, "a", "flush direct:a")
	step(EventStepDelta, "b", "direct:a direct:b")
	step(EventStepDelta, "keep", "direct:b direct:keep keep flush")
	step(EventStepDelta, "part", "direct:part flush")
	step(EventRunStarted, "", "flush run_started flush")
	step(EventStepStarted, "", "flush step_started flush")
	step(EventStepDelta, "c", "flush direct:c")
	// Deltas published while the consumer is busy are yielded, in order,
	// and flushed together (the batch after the busy one).
	waitIdle()
	publish(EventRunStarted, "hold")
	<-held
	publish(EventStepDelta, "x")
	publish(EventStepDelta, "y")
	close(hold)
	waitFor("direct:c run_started flush x y flush")
	step(EventStepDelta, "e", "flush direct:e")
	// A lag: the stream catches up from the ring after its position (that
	// of "e") and subscribes again; what Direct took is not repeated.
	before := logged()
	e.broker.Poke("s")
	waitFor(before + " flush")
	step(EventStepDelta, "d", "direct:e flush direct:d")
	cancel()
	<-done
	want := "flush direct:a direct:b direct:keep keep flush direct:part flush run_started flush step_started flush direct:c run_started flush x y flush direct:e flush direct:d"
	if got := logged(); got != want {
		t.Fatalf("log\n%s\nwant\n%s", got, want)
	}
}
