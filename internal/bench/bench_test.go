package bench

import (
	"context"
	"testing"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

func open(ctx context.Context, kind, path, sync string) (store.Store, error) {
	if kind == "sqlite" {
		return sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: sync})
	}
	return memory.New(), nil
}

// TestRunSmall checks the harness end to end on both stores.
func TestRunSmall(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite"} {
		r, err := Run(context.Background(), Config{Store: kind, Steps: 200, Runs: 2, Dir: t.TempDir(), Open: open})
		if err != nil {
			t.Fatal(err)
		}
		if r.Steps < 200 || r.StepsPerS <= 0 || r.PeakRSSMB <= 0 || r.FirstDecileUS <= 0 {
			t.Fatalf("%s: %+v", kind, r)
		}
	}
}

// BenchmarkSQLiteRun is one 10,000-step run on SQLite (for profiling).
func BenchmarkSQLiteRun(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r, err := Run(context.Background(), Config{Store: "sqlite", Steps: 10000, Dir: b.TempDir(), Open: open})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.PerStepUS, "us/step")
		b.ReportMetric(r.LastDecileUS/r.FirstDecileUS, "last/first")
	}
}
