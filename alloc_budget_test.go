package stepwise

import (
	"context"
	"runtime"
	"testing"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// TestStepAllocationBudget holds the standard tool loop on the memory
// store to its allocation budget (docs/PERFORMANCE.md, "Memory engine
// step"): at most 12 allocations and 2,900 bytes per committed step, the
// scripted model and the tool included. It is not parallel, so that no
// other test allocates meanwhile.
func TestStepAllocationBudget(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("the race detector changes what is allocated")
	}
	e, r := startEchoLoop(t, "budget", 2000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	steps := executeCountingSteps(t, e, r.ID)
	runtime.ReadMemStats(&after)
	allocs := float64(after.Mallocs-before.Mallocs) / float64(steps)
	bytes := float64(after.TotalAlloc-before.TotalAlloc) / float64(steps)
	t.Logf("%d steps: %.1f allocations, %.0f bytes per step", steps, allocs, bytes)
	if allocs > 12 || bytes > 2900 {
		t.Errorf("%.1f allocations and %.0f bytes per step, want at most 12 and 2,900", allocs, bytes)
	}
}

// startEchoLoop starts a run of the standard tool loop on the memory store:
// iterations llm steps that call the echo tool, then "done". The engine is
// closed when the test ends.
func startEchoLoop(t *testing.T, name string, iterations int) (*Engine, *Run) {
	t.Helper()
	type args struct {
		N int `json:"n"`
	}
	echo := tool.New("echo", "echo", func(ctx context.Context, a args) (int, error) { return a.N, nil })
	agent := &Agent{Name: name, Model: scripted.Loop("echo", `{"n":1}`, iterations, "done"), Tools: []tool.Tool{echo},
		Limits: Limits{MaxSteps: 2*iterations + 10}}
	e, err := New(Config{Store: memory.New(), Agents: []*Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	r, err := e.StartRun(t.Context(), StartParams{Agent: name, Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	return e, r
}

// executeCountingSteps executes run id to its end and returns the number
// of steps it completed.
func executeCountingSteps(t *testing.T, e *Engine, id string) int {
	t.Helper()
	steps := 0
	for ev, err := range e.Execute(t.Context(), id) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == EventStepCompleted {
			steps++
		}
	}
	return steps
}
