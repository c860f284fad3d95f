package stepwise

import (
	"fmt"
	"sync"
	"testing"
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
		subs[i], _, _ = b.subscribe(fmt.Sprintf("s%d", i), "", Position{})
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
	s, _, _ := b.subscribe("s", "", Position{})
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
