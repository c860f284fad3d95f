package stepwise

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// Concurrent publishers on many sessions (other shards, or the same shard):
// every subscriber gets its session's events exactly once, with strictly
// increasing positions, and no wake-up is lost.
func TestBrokerShardedDelivery(t *testing.T) {
	t.Parallel()
	b := newBroker()
	const sessions, events = 40, 500
	subs := make([]*subscriber, sessions)
	for i := range subs {
		subs[i], _, _ = b.subscribe(fmt.Sprintf("s%d", i), "", Position{}, nil)
	}
	var wg sync.WaitGroup
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		wg.Go(func() {
			for range events {
				b.publish(&Event{Type: EventStepDelta, SessionID: id})
			}
		})
		wg.Go(func() {
			var batch []*Event
			var last Position
			for n := 0; n < events; {
				select {
				case <-subs[i].ready:
				case <-subs[i].lag:
					t.Errorf("%s lagged", id)
					return
				}
				batch = subs[i].take(batch)
				for _, ev := range batch {
					if ev.SessionID != id || !last.Less(ev.Position) {
						t.Errorf("%s: event %+v after %v", id, ev.Position, last)
						return
					}
					last = ev.Position
					n++
				}
			}
		})
	}
	wg.Wait()
	if n := b.subscriberCount(); n != sessions {
		t.Fatalf("%d subscribers", n)
	}
}

// A subscriber more than its limit behind is switched to catch-up and gets
// nothing more; what it had queued is still delivered in order.
func TestSubscriberLagAtLimit(t *testing.T) {
	t.Parallel()
	b := newBroker()
	b.bufSize = 3
	s, _, _ := b.subscribe("s", "", Position{}, nil)
	for range 5 {
		b.publish(&Event{Type: EventStepDelta, SessionID: "s"})
	}
	select {
	case <-s.lag:
	default:
		t.Fatal("not lagged")
	}
	got := s.take(nil)
	if len(got) != 3 || got[0].Position.Idx != 1 || got[2].Position.Idx != 3 {
		t.Fatalf("queued %d events", len(got))
	}
	b.publish(&Event{Type: EventStepDelta, SessionID: "s"})
	if got := s.take(nil); len(got) != 0 {
		t.Fatalf("lagged subscriber got %d events", len(got))
	}
}

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
		e.broker.publish(&Event{Type: EventStepDelta, SessionID: "s", Delta: &Delta{Content: text}})
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
	for e.broker.subscriberCount() == 0 {
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

// An execution publishes into the topic acquire returned, without a lookup;
// once released (the topic may have been evicted and the session given a
// new one), publishing into it reaches the session's current topic.
func TestBrokerPublishToAcquiredTopic(t *testing.T) {
	t.Parallel()
	b := newBroker()
	b.maxIdle = 0 // a released topic nobody watches is evicted at once
	tp := b.acquire("s", 4)
	s1, _, _ := b.subscribe("s", "", Position{}, nil)
	b.publishTo(tp, &Event{Type: EventStepDelta, SessionID: "s"})
	if got := s1.take(nil); len(got) != 1 || got[0].Position != (Position{Seq: 4, Idx: 1}) {
		t.Fatalf("acquired topic: got %d events", len(got))
	}
	b.unsubscribe("s", s1)
	b.release("s")
	s2, _, _ := b.subscribe("s", "", Position{}, nil)
	b.publishTo(tp, &Event{Type: EventStepDelta, SessionID: "s"})
	if got := s2.take(nil); len(got) != 1 {
		t.Fatalf("released topic: the session's subscriber got %d events", len(got))
	}
}

// An answer's step_completed on an instance whose topic never saw the
// commit of the step it resolves (another instance made it): the live
// subscribers go to the store first (they may not have the steps up to it
// yet), and the resolution is positioned after the commit's (3, 0). Before,
// it took (3, 0) itself and was delivered alone: a subscriber that read
// step 3 from the store dropped it as the step it had, one that had not
// skipped steps 1 and 2 (TestTwoInstancesOnPostgres saw 1, 2, 4 about once
// in 80 runs).
func TestBrokerResolutionAfterRemoteCommit(t *testing.T) {
	t.Parallel()
	b := newBroker()
	s1, _, _ := b.subscribe("s", "", Position{}, nil)
	b.beginResolution("s")
	b.publishResolution("s", &Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 3}})
	if !s1.lagged.Load() || len(s1.take(nil)) != 0 {
		t.Fatal("the live subscriber was not sent to the store")
	}
	s2, buffered, storeTo := b.subscribe("s", "", Position{}, nil)
	if storeTo != 3 || len(buffered) != 1 || !(Position{Seq: 3}).Less(buffered[0].Position) {
		t.Fatalf("resubscribed: store to %d, ring %d events (%+v), want the store to 3 and the resolution after (3, 0)", storeTo, len(buffered), buffered)
	}
	// A topic that has seen later steps publishes as before.
	b.publish(&Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 5}})
	b.beginResolution("s")
	b.publishResolution("s", &Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 4}})
	if got := s2.take(nil); s2.lagged.Load() || len(got) != 2 || got[1].Position != (Position{Seq: 5, Idx: 1}) {
		t.Fatalf("resolution after step 5: %+v", got)
	}
}

// Another instance resumes an answered run as soon as the answer's commit
// queues it, and may commit the next step before this instance publishes
// the answer. A poke for that commit, between the answer's commit and its
// publication, is held: the live subscriber gets the answer first, then
// goes to the store for the later step. Before, it read step 4 from the
// store first and got the answer after it (TestTwoInstancesAnswerPublishedLate
// saw 1, 2, 4, then 3). A failed answer releases a held poke too.
func TestBrokerHoldsPokesWhileAnswering(t *testing.T) {
	t.Parallel()
	b := newBroker()
	s1, _, _ := b.subscribe("s", "", Position{}, nil)
	b.publish(&Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 3, Status: steptype.StepWaiting}})
	_ = s1.take(nil)
	b.beginResolution("s")
	b.poke("s") // another instance committed step 4
	if s1.lagged.Load() {
		t.Fatal("a poke during an answer's commit sent the subscriber to the store before the answer")
	}
	b.publishResolution("s", &Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 3, Status: steptype.StepCompleted}})
	if got := s1.take(nil); len(got) != 1 || got[0].Step.Status != steptype.StepCompleted || got[0].Position != (Position{Seq: 3, Idx: 1}) {
		t.Fatalf("live events %+v, want the answer at (3, 1)", got)
	}
	if !s1.lagged.Load() {
		t.Fatal("the held poke was not applied after the answer")
	}
	s2, _, storeTo := b.subscribe("s", "", Position{Seq: 3, Idx: 1}, nil)
	if storeTo != -1 {
		t.Fatalf("store to %d after a poke, want the whole store (-1)", storeTo)
	}
	b.beginResolution("s")
	b.poke("s")
	if s2.lagged.Load() {
		t.Fatal("a poke during an answer's commit sent the subscriber to the store")
	}
	b.publishResolution("s", nil) // the answer failed
	if !s2.lagged.Load() {
		t.Fatal("a failed answer kept the poke held")
	}
	b.poke("s")
	s3, _, _ := b.subscribe("s", "", Position{}, nil)
	b.poke("s")
	if !s3.lagged.Load() {
		t.Fatal("a poke with no answer in progress was held")
	}
}

// An execution of this process that resumes the answered run before the
// answer is published waits in acquire: its first step comes after the
// answer (before, step 4 came first and the answer after it).
func TestBrokerExecutionWaitsForAnswer(t *testing.T) {
	t.Parallel()
	b := newBroker()
	sub, _, _ := b.subscribe("s", "", Position{}, nil)
	b.publish(&Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 3, Status: steptype.StepWaiting}})
	b.beginResolution("s")
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp := b.acquire("s", 3)
		b.publishTo(tp, &Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 4, Status: steptype.StepCompleted}})
		b.release("s")
	}()
	time.Sleep(50 * time.Millisecond) // the execution would publish meanwhile
	b.publishResolution("s", &Event{Type: EventStepCompleted, SessionID: "s", Step: &Step{Sequence: 3, Status: steptype.StepCompleted}})
	<-done
	var seqs []int64
	for _, ev := range sub.take(nil) {
		if ev.Step.Status == steptype.StepCompleted {
			seqs = append(seqs, ev.Step.Sequence)
		}
	}
	if fmt.Sprint(seqs) != "[3 4]" {
		t.Fatalf("completed steps delivered %v, want the answer (3) before step 4", seqs)
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
	current := func() *subscriber {
		sh := e.broker.lock("s")
		defer sh.mu.Unlock()
		if t := sh.topics["s"]; t != nil && len(t.subs) == 1 {
			return t.subs[0]
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
	e.broker.poke("s")
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
