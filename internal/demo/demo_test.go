package demo_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/stepwisetest"
)

// now is the demo clock's time in the transcripts.
var now = func() time.Time { return time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC) }

// TestAnalystTranscript runs the demo question and compares its events
// with testdata/analyst.events.golden (go test -update rewrites it).
func TestAnalystTranscript(t *testing.T) {
	t.Parallel()
	analyst, err := demo.Agents(demo.Options{Fast: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{analyst}})
	events := stepwisetest.Collect(t, e.Run(t.Context(), stepwise.StartParams{Agent: "analyst", Input: demo.Input}))
	last := events[len(events)-1]
	if last.Type != stepwise.EventRunFinished || last.Run.Status != steptype.RunCompleted {
		t.Fatalf("last event %s, run %+v", last.Type, last.Run)
	}
	stepwisetest.Golden(t, "testdata/analyst.events.golden", events)
}

// TestOperatorTranscript runs the approval demo: the run parks on the
// archive call, a human approves, the run resumes and finishes. Both
// halves are compared with testdata/operator.events.golden.
func TestOperatorTranscript(t *testing.T) {
	t.Parallel()
	operator, err := demo.Operator(demo.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{operator}})
	ctx := t.Context()
	events := stepwisetest.Collect(t, e.Run(ctx, stepwise.StartParams{Agent: "operator", Input: demo.OperatorInput}))
	last := events[len(events)-1]
	if last.Type != stepwise.EventRunWaiting {
		t.Fatalf("last event %s, want run_waiting", last.Type)
	}
	pending, err := e.Pending(ctx, last.RunID)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	answer, _ := json.Marshal(stepwise.ApprovalAnswer{Approved: true})
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: last.RunID, RequestID: pending[0].RequestID, Answer: answer}); err != nil {
		t.Fatal(err)
	}
	events = append(events, stepwisetest.Collect(t, e.Resume(ctx, last.RunID))...)
	if last := events[len(events)-1]; last.Type != stepwise.EventRunFinished || last.Run.Status != steptype.RunCompleted {
		t.Fatalf("last event %s, run %+v", last.Type, last.Run)
	}
	stepwisetest.Golden(t, "testdata/operator.events.golden", events)
}
