package storetest

import (
	"os"
	"strconv"
	"testing"
)

// MetricsBenchSteps is the size of the data set of the metrics benchmarks:
// STEPWISE_BENCH_METRICS_STEPS, default 1,000,000.
func MetricsBenchSteps(tb testing.TB) int {
	n := 1_000_000
	if v := os.Getenv("STEPWISE_BENCH_METRICS_STEPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			tb.Fatalf("STEPWISE_BENCH_METRICS_STEPS=%q: want an integer >= 100", v)
		}
	}
	return n
}
