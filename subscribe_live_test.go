package stepwise

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// SubscribeParams.Flush is called each time the stream has handed over
// what it has and is about to wait: after the replay, then once per batch
// of live events, never inside one. Events published while the consumer
// is busy arrive together, complete, in order and once.
func TestSubscribeFlushPerBatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEngineWithSession(t, ctx, "s")
	publish := func(text string) {
		e.broker.Publish(&Event{Type: EventStepDelta, SessionID: "s", Delta: &Delta{Content: text}})
	}
	first, hold, done := make(chan struct{}), make(chan struct{}), make(chan []string)
	go func() {
		var log []string
		flush := func() error { log = append(log, "flush"); return nil }
		for ev, err := range e.Subscribe(ctx, SubscribeParams{SessionID: "s", Flush: flush}) {
			if err != nil {
				break
			}
			log = append(log, ev.Delta.Content)
			if ev.Delta.Content == "0" {
				close(first)
				<-hold // the burst is published meanwhile
			}
			if ev.Delta.Content == "9" {
				break
			}
		}
		done <- log
	}()
	for e.broker.SubscriberCount() == 0 {
		time.Sleep(time.Millisecond)
	}
	publish("0")
	<-first
	for i := 1; i <= 9; i++ {
		publish(fmt.Sprint(i))
	}
	close(hold)
	got := fmt.Sprint(<-done)
	if want := "[flush 0 flush 1 2 3 4 5 6 7 8 9]"; got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
}

// A live subscription waits on its subscriber's ready channel alone: a poke
// (another instance committed) on a quiet session wakes it to catch up
// from the store and subscribe again, and the end of its context ends it.
func TestSubscribeWakesOnLagAndCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEngineWithSession(t, ctx, "s")
	current := func() *broker.Subscriber {
		if subs := e.broker.Subscribers("s"); len(subs) == 1 {
			return subs[0]
		}
		return nil
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	subCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		var last error
		for _, err := range e.Subscribe(subCtx, SubscribeParams{SessionID: "s"}) {
			last = err
		}
		ended <- last
	}()
	waitFor("subscribed", func() bool { return current() != nil })
	first := current()
	e.broker.Poke("s")
	waitFor("subscribed again after the poke", func() bool { s := current(); return s != nil && s != first })
	stop()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the stream ended without its context's error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end with its context")
	}
}

// newEngineWithSession returns an engine on a memory store that holds an
// empty session id; both are closed when the test ends.
func newEngineWithSession(t *testing.T, ctx context.Context, id string) *Engine {
	t.Helper()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	e, err := New(Config{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if _, err := mem.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
		t.Fatal(err)
	}
	return e
}
