package cli

import (
	"testing"

	"github.com/stepwise-run/stepwise/internal/loadgen"
)

// `stepwise bench --http` with no --latency measures the load that
// BenchmarkHTTPStreaming measures and docs/PERFORMANCE.md reports, not a
// pace ten times faster that saturates the machine.
func TestBenchHTTPLatencyDefault(t *testing.T) {
	f := benchCmd(&env{}).Flags().Lookup("latency")
	if f == nil {
		t.Fatal("bench has no --latency flag")
	}
	if want := loadgen.DefaultLatency.String(); f.DefValue != want {
		t.Errorf("bench --latency defaults to %s, want %s (loadgen.DefaultLatency)", f.DefValue, want)
	}
}
