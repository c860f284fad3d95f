package stepwise

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/store/memory"
)

// BenchmarkIdleSubscribers measures what an idle live subscriber costs:
// 10,000 session streams (one per session) are opened with Subscribe, each
// consumed by its own goroutine, and the heap and goroutine stacks in use
// after a GC are compared with those before. It reports bytes per
// subscriber (target ≤ 10 KB).
func BenchmarkIdleSubscribers(b *testing.B) {
	const n = 10000
	for b.Loop() {
		b.StopTimer()
		per := idleSubscriberCost(b, n)
		b.StartTimer()
		b.ReportMetric(per, "B/subscriber")
	}
}

func idleSubscriberCost(b *testing.B, n int) float64 {
	e, err := New(Config{Store: memory.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ids := make([]string, n)
	for i := range ids {
		s, err := e.CreateSession(ctx, "bench", "")
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = s.ID
	}
	before := inUse()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for _, err := range e.Subscribe(ctx, SubscribeParams{SessionID: id}) {
				if err != nil {
					return
				}
			}
		})
	}
	for e.broker.SubscriberCount() < n {
		runtime.Gosched()
	}
	after := inUse()
	cancel()
	wg.Wait()
	return float64(after-before) / float64(n)
}

// inUse is the heap and stack memory in use after a full GC.
func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
