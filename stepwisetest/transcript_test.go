package stepwisetest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/stepwisetest"
)

// events is an assistant step calling two tools, its streamed deltas, and
// the two results committed in the order given.
func events(first, second string, chunks ...string) []*stepwise.Event {
	at := time.Now()
	call := &stepwise.Step{ID: "s-llm", RunID: "r", Kind: steptype.KindLLM, Sequence: 2,
		ToolCalls: []steptype.ToolCall{{ID: "c-a", Name: "a"}, {ID: "c-b", Name: "b"}}}
	evs := []*stepwise.Event{}
	for _, c := range chunks {
		evs = append(evs, &stepwise.Event{Type: stepwise.EventStepDelta, RunID: "r", StepName: "llm", Time: at, Delta: &stepwise.Delta{Content: c}})
	}
	evs = append(evs, &stepwise.Event{Type: stepwise.EventStepDelta, RunID: "r", StepName: "llm",
		Delta: &stepwise.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "c-a", Name: "a", Arguments: `{"x":`}}})
	evs = append(evs, &stepwise.Event{Type: stepwise.EventStepDelta, RunID: "r", StepName: "llm",
		Delta: &stepwise.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: `1}`}}})
	evs = append(evs, &stepwise.Event{Type: stepwise.EventStepCompleted, RunID: "r", Step: call, Position: stepwise.Position{Seq: 2}})
	result := func(seq int64, callID string) *stepwise.Event {
		return &stepwise.Event{Type: stepwise.EventStepCompleted, RunID: "r", Time: at.Add(time.Duration(seq)), Position: stepwise.Position{Seq: seq},
			Step: &stepwise.Step{ID: "s" + callID, RunID: "r", Kind: steptype.KindTool, Sequence: seq, ToolCallID: callID, Content: "result of " + callID}}
	}
	return append(evs, result(3, first), result(4, second))
}

func TestTranscriptIsCanonical(t *testing.T) {
	t.Parallel()
	a, err := stepwisetest.Transcript(events("c-a", "c-b", "Hel", "lo"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := stepwisetest.Transcript(events("c-b", "c-a", "H", "ello"))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("transcripts differ:\n%s\n---\n%s", a, b)
	}
	got := string(a)
	for _, want := range []string{`"content": "Hello"`, `"arguments": "{\"x\":1}"`, `"position": "3:0"`} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %s:\n%s", want, got)
		}
	}
	if strings.Index(got, "result of c-a") > strings.Index(got, "result of c-b") {
		t.Errorf("results not in call order:\n%s", got)
	}
	if strings.Contains(got, `"c-a"`) || strings.Contains(got, `"s-llm"`) || strings.Contains(got, `"20`) {
		t.Errorf("an id or a time is not masked:\n%s", got)
	}
}

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestGoldenReportsTheDifference(t *testing.T) {
	t.Parallel()
	evs := events("c-a", "c-b", "Hello")
	path := filepath.Join(t.TempDir(), "x.events.golden")
	got, err := stepwisetest.Transcript(evs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	stepwisetest.Golden(r, path, evs)
	if len(r.errors) != 0 {
		t.Fatalf("an equal transcript failed: %v", r.errors)
	}
	stepwisetest.Golden(r, path, events("c-a", "c-b", "Goodbye"))
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "first difference") ||
		!strings.Contains(r.errors[0], `-     "content": "Hello"`) || !strings.Contains(r.errors[0], `+     "content": "Goodbye"`) {
		t.Fatalf("a different transcript reported %q", r.errors)
	}
}
