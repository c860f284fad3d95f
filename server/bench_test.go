package server

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkHTTPStreaming measures streaming over HTTP on loopback: N
// concurrent runs, each watched by its own SSE subscriber, on a model that
// streams 8 deltas per call with 2ms latency before each and calls a tool
// 3 times (8 steps per run). It reports committed steps/s, the delivery
// latency of deltas from the model to the subscriber (p50, p99), and the
// peak live heap. See RunLoad and `stepwise bench --http`.
func BenchmarkHTTPStreaming(b *testing.B) {
	for _, runs := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			var last *LoadResult
			for b.Loop() {
				res, err := RunLoad(context.Background(), LoadConfig{Runs: runs, Turns: 4, Deltas: 8, Latency: 2 * time.Millisecond})
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
	res, err := RunLoad(context.Background(), LoadConfig{Runs: 5, Turns: 3, Deltas: 4, Latency: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 5 || res.Steps != 5*6 || res.Deltas != 5*3*4 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 || res.StepsPerS <= 0 || res.PeakHeapMB <= 0 {
		t.Fatalf("result %+v", res)
	}
	t.Log(res)
}
