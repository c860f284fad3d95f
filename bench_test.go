package stepwise_test

import (
	"context"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

type echoArgs struct {
	N int `json:"n"`
}

// BenchmarkEngineStep measures the engine's per-step overhead on the memory
// store: one op is one committed step of the standard tool loop.
func BenchmarkEngineStep(b *testing.B) {
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	iterations := max(1, b.N/2)
	agent := &stepwise.Agent{Name: "bench", Model: scripted.Loop("echo", `{"n":1}`, iterations, "done"), Tools: []tool.Tool{echo},
		Limits: stepwise.Limits{MaxSteps: 2*iterations + 10}}
	e, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{agent}})
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
	if steps < b.N {
		b.Fatalf("only %d steps", steps)
	}
}
