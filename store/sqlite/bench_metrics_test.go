package sqlite_test

import (
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store/storetest"
)

// BenchmarkMetrics: time-series aggregation over MetricsBenchSteps steps
// (1,000,000 by default) spread over 24 hours.
func BenchmarkMetrics(b *testing.B) {
	st := benchOpen(b, "NORMAL")
	end := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	storetest.SeedMetrics(b, st, storetest.MetricsBenchSteps(b), end)
	b.Logf("seeded %d steps in %v", storetest.MetricsBenchSteps(b), time.Since(t0))
	storetest.BenchMetrics(b, st, end)
}
