package loadgen

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store/memory"
)

// BenchmarkHTTPStreaming measures streaming over HTTP on loopback: N
// concurrent runs, each watched by its own SSE subscriber, on a model that
// streams 10 deltas per call, 20ms (±50%) apart, and calls a tool 7 times
// (16 steps per run); starts are spread over one model call (200ms), and
// runs=1000/burst starts them all at once. It reports committed steps/s,
// the delivery latency of deltas from the model to the subscriber (p50,
// p99), CPU per event and the peak live heap. See Run and
// `stepwise bench --http`.
//
// The subscribers run in a process of their own (this test binary, started
// again: TestLoadClientProcess), as real clients on other machines do;
// the inprocess/ variants keep them in the benchmark's process, the
// harness of the earlier rounds, whose figures they compare with.
func BenchmarkHTTPStreaming(b *testing.B) {
	for _, inproc := range []bool{false, true} {
		for _, c := range []Config{{Runs: 10}, {Runs: 100}, {Runs: 1000}, {Runs: 1000, Burst: true}} {
			name := fmt.Sprintf("runs=%d", c.Runs)
			if c.Burst {
				name += "/burst"
			}
			if inproc {
				name = "inprocess/" + name
			} else {
				c.ClientCommand = loadClientCommand()
			}
			b.Run(name, func(b *testing.B) {
				var last *Result
				for b.Loop() {
					res, err := runLoad(b, c)
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
}

// loadClientCommand starts this test binary again as Run's client
// process: it runs TestLoadClientProcess alone. STEPWISE_LOAD_CLIENT_PREFIX
// (words separated by spaces) is put before it, to measure with the
// clients under another scheduling policy (e.g. "chrt -r 11": the clients
// read as soon as data arrives, as on machines of their own).
func loadClientCommand() []string {
	return append(strings.Fields(os.Getenv("STEPWISE_LOAD_CLIENT_PREFIX")), os.Args[0], "-test.run=^TestLoadClientProcess$", "-test.bench=^$", "-test.count=1")
}

// TestLoadClientProcess is Run's client process when this test binary
// is started by loadClientCommand; otherwise it has nothing to do.
func TestLoadClientProcess(t *testing.T) {
	if !IsClient() {
		t.Skip("only as Run's client process")
	}
	if err := ClientMain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRunLoadClientProcess runs the subscribers in their own process: the
// same counts as in process, every delta delivered and measured.
func TestRunLoadClientProcess(t *testing.T) {
	t.Parallel()
	res, err := runLoad(t, Config{Runs: 5, Turns: 3, Deltas: 4, Latency: time.Millisecond, ClientCommand: loadClientCommand()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.ClientProcess || res.Runs != 5 || res.Steps != 5*6 || res.Deltas != 5*3*4 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 || res.StepsPerS <= 0 {
		t.Fatalf("result %+v", res)
	}
	if res.ServerCPUPerEvent <= 0 || res.CPUPerEvent <= res.ServerCPUPerEvent {
		t.Fatalf("CPU per event %s, server's %s: want the client's counted in the first only", res.CPUPerEvent, res.ServerCPUPerEvent)
	}
	t.Log(res)
}

func TestRunLoadSmall(t *testing.T) {
	t.Parallel()
	res, err := runLoad(t, Config{Runs: 5, Turns: 3, Deltas: 4, Latency: time.Millisecond, Burst: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 5 || res.Steps != 5*6 || res.Deltas != 5*3*4 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 || res.StepsPerS <= 0 || res.PeakHeapMB <= 0 {
		t.Fatalf("result %+v", res)
	}
	t.Log(res)
}

// runLoad is Run on a new in-memory store, closed when it returns.
func runLoad(tb testing.TB, c Config) (*Result, error) {
	tb.Helper()
	st := memory.New()
	defer st.Close()
	c.Store = st
	return Run(context.Background(), c)
}
