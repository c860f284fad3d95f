package stepwise_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

type echoArgs struct {
	N int `json:"n"`
}

// BenchmarkEngineStep measures the engine's per-step overhead on the memory
// store: one op is one committed step of the standard tool loop.
func BenchmarkEngineStep(b *testing.B) { benchEngineStep(b, memory.New()) }

// BenchmarkEngineStepSQLite is BenchmarkEngineStep on a SQLite file (WAL,
// synchronous=NORMAL): what `stepwise bench --store sqlite` runs, with the
// test tools' -cpuprofile and -memprofile.
func BenchmarkEngineStepSQLite(b *testing.B) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchEngineStep(b, st)
}

func benchEngineStep(b *testing.B, st store.Store) {
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	iterations := max(1, b.N/2)
	agent := &stepwise.Agent{Name: "bench", Model: scripted.Loop("echo", `{"n":1}`, iterations, "done"), Tools: []tool.Tool{echo},
		Limits: stepwise.Limits{MaxSteps: 2*iterations + 10}}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: "bench", Input: "go"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	steps := 0
	for ev, err := range e.Execute(ctx, r.ID) {
		if err != nil {
			b.Fatal(err)
		}
		if ev.Type == stepwise.EventStepCompleted {
			steps++
		}
	}
	b.StopTimer()
	if cpu := cpuTime() - cpu0; cpu > 0 && steps > 0 {
		// Process CPU (user + system, the GC's workers included) per
		// step: on a shared machine steadier than the wall ns/op.
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(steps), "cpu-ns/step")
	}
	if steps < b.N {
		b.Fatalf("only %d steps", steps)
	}
}
