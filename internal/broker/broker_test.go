package broker

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stepwise-run/stepwise/steptype"
)

// Concurrent publishers on many sessions (other shards, or the same shard):
// every subscriber gets its session's events exactly once, with strictly
// increasing positions, and no wake-up is lost.
func TestBrokerShardedDelivery(t *testing.T) {
	t.Parallel()
	b := New()
	const sessions, events = 40, 500
	subs := make([]*Subscriber, sessions)
	for i := range subs {
		subs[i], _, _ = b.Subscribe(fmt.Sprintf("s%d", i), "", steptype.Position{}, nil)
	}
	var wg sync.WaitGroup
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		wg.Go(func() {
			for range events {
				b.Publish(&steptype.Event{Type: steptype.EventStepDelta, SessionID: id})
			}
		})
		wg.Go(func() {
			var batch []*steptype.Event
			var last steptype.Position
			for n := 0; n < events; {
				select {
				case <-subs[i].Ready():
				case <-subs[i].Lag():
					t.Errorf("%s lagged", id)
					return
				}
				batch = subs[i].Take(batch)
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
	if n := b.SubscriberCount(); n != sessions {
		t.Fatalf("%d subscribers", n)
	}
}

// A subscriber more than its limit behind is switched to catch-up and gets
// nothing more; what it had queued is still delivered in order.
func TestSubscriberLagAtLimit(t *testing.T) {
	t.Parallel()
	b := New()
	b.bufSize = 3
	s, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	for range 5 {
		b.Publish(&steptype.Event{Type: steptype.EventStepDelta, SessionID: "s"})
	}
	select {
	case <-s.Lag():
	default:
		t.Fatal("not lagged")
	}
	got := s.Take(nil)
	if len(got) != 3 || got[0].Position.Idx != 1 || got[2].Position.Idx != 3 {
		t.Fatalf("queued %d events", len(got))
	}
	b.Publish(&steptype.Event{Type: steptype.EventStepDelta, SessionID: "s"})
	if got := s.Take(nil); len(got) != 0 {
		t.Fatalf("lagged subscriber got %d events", len(got))
	}
}

// An execution publishes into the topic acquire returned, without a lookup;
// once released (the topic may have been evicted and the session given a
// new one), publishing into it reaches the session's current topic.
func TestBrokerPublishToAcquiredTopic(t *testing.T) {
	t.Parallel()
	b := New()
	b.maxIdle = 0 // a released topic nobody watches is evicted at once
	tp := b.Acquire("s", 4)
	s1, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	b.PublishTo(tp, &steptype.Event{Type: steptype.EventStepDelta, SessionID: "s"})
	if got := s1.Take(nil); len(got) != 1 || got[0].Position != (steptype.Position{Seq: 4, Idx: 1}) {
		t.Fatalf("acquired topic: got %d events", len(got))
	}
	b.Unsubscribe("s", s1)
	b.Release("s")
	s2, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	b.PublishTo(tp, &steptype.Event{Type: steptype.EventStepDelta, SessionID: "s"})
	if got := s2.Take(nil); len(got) != 1 {
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
	b := New()
	s1, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	b.BeginResolution("s")
	b.PublishResolution("s", &steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 3}})
	if !s1.Lagged() || len(s1.Take(nil)) != 0 {
		t.Fatal("the live subscriber was not sent to the store")
	}
	s2, buffered, storeTo := b.Subscribe("s", "", steptype.Position{}, nil)
	if storeTo != 3 || len(buffered) != 1 || !(steptype.Position{Seq: 3}).Less(buffered[0].Position) {
		t.Fatalf("resubscribed: store to %d, ring %d events (%+v), want the store to 3 and the resolution after (3, 0)", storeTo, len(buffered), buffered)
	}
	// A topic that has seen later steps publishes as before.
	b.Publish(&steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 5}})
	b.BeginResolution("s")
	b.PublishResolution("s", &steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 4}})
	if got := s2.Take(nil); s2.Lagged() || len(got) != 2 || got[1].Position != (steptype.Position{Seq: 5, Idx: 1}) {
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
	b := New()
	s1, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	b.Publish(&steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 3, Status: steptype.StepWaiting}})
	_ = s1.Take(nil)
	b.BeginResolution("s")
	b.Poke("s") // another instance committed step 4
	if s1.Lagged() {
		t.Fatal("a poke during an answer's commit sent the subscriber to the store before the answer")
	}
	b.PublishResolution("s", &steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 3, Status: steptype.StepCompleted}})
	if got := s1.Take(nil); len(got) != 1 || got[0].Step.Status != steptype.StepCompleted || got[0].Position != (steptype.Position{Seq: 3, Idx: 1}) {
		t.Fatalf("live events %+v, want the answer at (3, 1)", got)
	}
	if !s1.Lagged() {
		t.Fatal("the held poke was not applied after the answer")
	}
	s2, _, storeTo := b.Subscribe("s", "", steptype.Position{Seq: 3, Idx: 1}, nil)
	if storeTo != -1 {
		t.Fatalf("store to %d after a poke, want the whole store (-1)", storeTo)
	}
	b.BeginResolution("s")
	b.Poke("s")
	if s2.Lagged() {
		t.Fatal("a poke during an answer's commit sent the subscriber to the store")
	}
	b.PublishResolution("s", nil) // the answer failed
	if !s2.Lagged() {
		t.Fatal("a failed answer kept the poke held")
	}
	b.Poke("s")
	s3, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	b.Poke("s")
	if !s3.Lagged() {
		t.Fatal("a poke with no answer in progress was held")
	}
}

// An execution of this process that resumes the answered run before the
// answer is published waits in acquire: its first step comes after the
// answer (before, step 4 came first and the answer after it).
func TestBrokerExecutionWaitsForAnswer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := New()
		sub, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
		b.Publish(&steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 3, Status: steptype.StepWaiting}})
		b.BeginResolution("s")
		done := make(chan struct{})
		go func() {
			defer close(done)
			tp := b.Acquire("s", 3)
			b.PublishTo(tp, &steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 4, Status: steptype.StepCompleted}})
			b.Release("s")
		}()
		// Wait until the execution is blocked in Acquire, or (if the hold
		// failed) has published step 4 and finished.
		synctest.Wait()
		b.PublishResolution("s", &steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 3, Status: steptype.StepCompleted}})
		<-done
		var seqs []int64
		for _, ev := range sub.Take(nil) {
			if ev.Step.Status == steptype.StepCompleted {
				seqs = append(seqs, ev.Step.Sequence)
			}
		}
		if fmt.Sprint(seqs) != "[3 4]" {
			t.Fatalf("completed steps delivered %v, want the answer (3) before step 4", seqs)
		}
	})
}
