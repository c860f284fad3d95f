package server

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkHTTPStreaming measures streaming over HTTP on loopback: N
// concurrent runs, each watched by its own SSE subscriber, on a model that
// streams 10 deltas per call, 20ms (±50%) apart, and calls a tool 7 times
// (16 steps per run); starts are spread over one model call (200ms), and
// runs=1000/burst starts them all at once. It reports committed steps/s,
// the delivery latency of deltas from the model to the subscriber (p50,
// p99), CPU per event and the peak live heap. See RunLoad and
// `stepwise bench --http`.
func BenchmarkHTTPStreaming(b *testing.B) {
	for _, c := range []LoadConfig{{Runs: 10}, {Runs: 100}, {Runs: 1000}, {Runs: 1000, Burst: true}} {
		name := fmt.Sprintf("runs=%d", c.Runs)
		if c.Burst {
			name += "/burst"
		}
		b.Run(name, func(b *testing.B) {
			var last *LoadResult
			for b.Loop() {
				res, err := RunLoad(context.Background(), c)
				if err != nil {
					b.Fatal(err)
				}
				last = res
			}
			b.ReportMetric(last.StepsPerS, "steps/s")
			b.ReportMetric(float64(last.P50.Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(last.P99.Microseconds())/1000, "p99_ms")
			b.ReportMetric(last.PeakHeapMB, "peak_heap_MB")
			b.Logf("%s", last)
		})
	}
}

func TestRunLoadSmall(t *testing.T) {
	t.Parallel()
	res, err := RunLoad(context.Background(), LoadConfig{Runs: 5, Turns: 3, Deltas: 4, Latency: time.Millisecond, Burst: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 5 || res.Steps != 5*6 || res.Deltas != 5*3*4 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 || res.StepsPerS <= 0 || res.PeakHeapMB <= 0 {
		t.Fatalf("result %+v", res)
	}
	t.Log(res)
}
