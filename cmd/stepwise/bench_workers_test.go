package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/pgtest"
)

// TestBenchWorkers runs `stepwise bench workers` small on SQLite and on
// PostgreSQL: both phases run to the end and report their numbers with
// the CPU model (no assertion on the numbers themselves: they live in
// docs/PERFORMANCE.md). Bad input is refused.
func TestBenchWorkers(t *testing.T) {
	t.Parallel()
	pg := pgtest.DSN(t)
	out, errOut, code := stepwise(t, t.TempDir(), "--db", pg, "bench", "workers", "--store", "sqlite,postgres",
		"--cycles", "20", "--workers", "2", "--concurrency", "2", "--runs", "5", "--steps", "3", "--json")
	if code != 0 {
		t.Fatalf("bench workers: exit %d\n%s\n%s", code, out, errOut)
	}
	var got struct {
		Workers []struct {
			Store       string  `json:"store"`
			CPU         string  `json:"cpu"`
			Cycles      int     `json:"cycles"`
			GoP50US     float64 `json:"go_step_p50_us"`
			WorkerP50US float64 `json:"worker_step_p50_us"`
			WorkerP95US float64 `json:"worker_step_p95_us"`
			Runs        int     `json:"runs"`
			StepsPerS   float64 `json:"worker_steps_per_s"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Workers) != 2 {
		t.Fatalf("results: %s", out)
	}
	for i, r := range got.Workers {
		if r.Store != []string{"sqlite", "postgres"}[i] || r.Cycles != 20 || r.Runs != 5 || r.GoP50US <= 0 || r.WorkerP50US <= 0 ||
			r.WorkerP95US < r.WorkerP50US || r.StepsPerS <= 0 || !strings.Contains(r.CPU, "family") {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if _, errOut, code := stepwise(t, t.TempDir(), "bench", "workers", "--store", "postgres"); code == 0 || !strings.Contains(errOut, "--db postgres://") {
		t.Errorf("--store postgres without --db: exit %d, %s", code, errOut)
	}
	if _, errOut, code := stepwise(t, t.TempDir(), "bench", "workers", "--store", "oracle"); code == 0 || !strings.Contains(errOut, `"oracle"`) {
		t.Errorf("--store oracle: exit %d, %s", code, errOut)
	}
}
