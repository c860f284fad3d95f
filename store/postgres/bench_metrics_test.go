package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// BenchmarkMetrics: time-series aggregation over MetricsBenchSteps steps
// (1,000,000 by default) spread over 24 hours, after VACUUM ANALYZE (what
// autovacuum does to a table of that size) so that the covering index is
// read with index-only scans.
func BenchmarkMetrics(b *testing.B) {
	schema := freshSchema(b)
	st := open(b, postgres.Config{Schema: schema})
	end := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	storetest.SeedMetrics(b, st, storetest.MetricsBenchSteps(b), end)
	b.Logf("seeded %d steps in %v", storetest.MetricsBenchSteps(b), time.Since(t0))
	conn := rawConn(b)
	for _, tbl := range []string{"steps", "runs", "sessions"} {
		if _, err := conn.Exec(b.Context(), `VACUUM ANALYZE `+pgx.Identifier{schema, tbl}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
	storetest.BenchMetrics(b, st, end)
}
