package stepwise_test

import (
	"context"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// TestStepEventTimes: a step_completed event is stamped with its step's
// commit time (the step's CreatedAt), and a step_started event with the
// start of the step (the StartedAt of the step it commits, for a step
// that commits itself).
func TestStepEventTimes(t *testing.T) {
	t.Parallel()
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	agent := &stepwise.Agent{Name: "times", Model: scripted.Loop("echo", `{"n":1}`, 3, "done"), Tools: []tool.Tool{echo}}
	e, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.StartRun(t.Context(), stepwise.StartParams{Agent: "times", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var started *stepwise.Event
	completed := 0
	for ev, err := range e.Execute(t.Context(), r.ID) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stepwise.EventStepStarted:
			started = ev
		case stepwise.EventStepCompleted:
			completed++
			if !ev.Time.Equal(ev.Step.CreatedAt) {
				t.Errorf("step %s (%s) completed at %v, committed at %v", ev.Step.Name, ev.Step.Kind, ev.Time, ev.Step.CreatedAt)
			}
			if ev.Step.Name == stepwise.StepLLM && started != nil && !started.Time.Equal(ev.Step.Metrics.StartedAt) {
				t.Errorf("llm step started at %v, its event at %v", ev.Step.Metrics.StartedAt, started.Time)
			}
		}
	}
	if completed < 7 {
		t.Fatalf("%d steps completed", completed)
	}
}
