package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// BenchmarkAppendEvent encodes the SSE data of the two events a streaming
// run sends most: a delta, and the step_completed of a model step that
// asks for a tool (content, one tool call, metrics).
func BenchmarkAppendEvent(b *testing.B) {
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	step := &steptype.Step{ID: "01JDQ3ZK6M0000000000000000", SessionID: "01JDQ3ZK6M0000000000000001", RunID: "01JDQ3ZK6M0000000000000002",
		Sequence: 7, ParentID: "01JDQ3ZK6M0000000000000003", Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted,
		Role: steptype.RoleAssistant, Content: "t1764230400000000000|t1764230400020000000|t1764230400040000000|",
		ToolCalls: []steptype.ToolCall{{ID: "c3", Name: "noop", Arguments: json.RawMessage(`{}`)}},
		Metrics: steptype.Metrics{StartedAt: t0, FinishedAt: t0.Add(200 * time.Millisecond), Duration: 200 * time.Millisecond,
			FirstTokenLatency: 20 * time.Millisecond, InputTokens: 10, OutputTokens: 10, Model: "load:stamp", Attempt: 1},
		Fingerprint: "9f86d081884c7d659a2feaa0c55ad015", CreatedAt: t0.Add(200 * time.Millisecond)}
	for _, c := range []struct {
		name string
		ev   *stepwise.Event
	}{
		{"delta", &stepwise.Event{Type: stepwise.EventStepDelta, SessionID: step.SessionID, RunID: step.RunID, StepName: "llm",
			Time: t0, Position: stepwise.Position{Seq: 7, Idx: 4}, Delta: &stepwise.Delta{Content: "t1764230400060000000|"}}},
		{"step_completed", &stepwise.Event{Type: stepwise.EventStepCompleted, SessionID: step.SessionID, RunID: step.RunID, StepName: "llm",
			Time: t0, Position: stepwise.Position{Seq: 7}, Step: step}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 4096)
			var e eventEncoder // a stream's: the ids and the second are the same each time
			for b.Loop() {
				var err error
				if buf, err = e.append(buf[:0], c.ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
