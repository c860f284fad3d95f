package cli

import (
	"testing"

	"github.com/stepwise-run/stepwise/server"
)

// `stepwise bench --http` with no --latency measures the load that
// BenchmarkHTTPStreaming measures and docs/PERFORMANCE.md reports, not a
// pace ten times faster that saturates the machine.
func TestBenchHTTPLatencyDefault(t *testing.T) {
	f := benchCmd(&env{}).Flags().Lookup("latency")
	if f == nil {
		t.Fatal("bench has no --latency flag")
	}
	if want := server.DefaultLoadLatency.String(); f.DefValue != want {
		t.Errorf("bench --latency defaults to %s, want %s (server.DefaultLoadLatency)", f.DefValue, want)
	}
}
