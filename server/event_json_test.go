package server

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestAppendEventMatchesEncodingJSON checks the hand-written event encoder
// against encoding/json on events of every shape.
func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	weird := "a\"b\\c\nd\re\tf\x00g\x1fh<i>j&k\u2028l\u2029m\xffn😀o"
	evs := []*stepwise.Event{
		{Type: stepwise.EventStepDelta, SessionID: "s", RunID: "r", Position: stepwise.Position{Seq: 3, Idx: 7}, Time: now, StepName: "llm", Delta: &stepwise.Delta{Content: weird}},
		{Type: stepwise.EventStepDelta, SessionID: weird, RunID: "r", Time: now, Delta: &stepwise.Delta{Reasoning: "think", Content: "x"}},
		{Type: stepwise.EventStepDelta, SessionID: "s", RunID: "r", Time: now, Delta: &stepwise.Delta{ToolCall: &llm.ToolCallDelta{Index: 2, ID: "c", Name: "f", Arguments: `{"a":`}}},
		{Type: stepwise.EventStepDelta, SessionID: "s", RunID: "r", Time: now, Delta: &stepwise.Delta{ToolCall: &llm.ToolCallDelta{Arguments: "1}"}}},
		{Type: stepwise.EventStepCompleted, SessionID: "s", RunID: "r", Position: stepwise.Position{Seq: 9}, Time: now, StepName: "tools",
			Step: &stepwise.Step{ID: "i", Sequence: 9, Kind: steptype.KindTool, Content: weird, Outputs: json.RawMessage(`{"x": [1, 2]}`), CreatedAt: now}},
		{Type: stepwise.EventRunFinished, SessionID: "s", RunID: "r", Time: time.Time{}, Run: &stepwise.Run{ID: "r", Status: steptype.RunCompleted, Output: weird, State: json.RawMessage(`{"k":1}`)}},
		{Type: stepwise.EventRunStarted, SessionID: "", RunID: ""},
	}
	for _, ev := range evs {
		got, err := appendEvent(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(eventWire(ev))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("event %s:\n got %s\nwant %s", ev.Type, got, want)
		}
	}
}
