package memory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// BenchmarkPack packs the two steps of the engine's tool loop (an llm step
// with one call and metadata, and its tool result), as StepAppend does.
func BenchmarkPack(b *testing.B) {
	now := time.Now().UTC().Round(0)
	m := steptype.Metrics{StartedAt: now, FinishedAt: now.Add(time.Millisecond), Duration: time.Millisecond,
		InputTokens: 1200, OutputTokens: 30, Model: "scripted", Attempt: 1}
	llm := &steptype.Step{ID: "019ac5d4-1c2b-7e3a-9f10-0123456789ab", SessionID: "019ac5d4-1c2b-7e3a-9f10-0123456789ac",
		RunID: "019ac5d4-1c2b-7e3a-9f10-0123456789ad", ParentID: "019ac5d4-1c2b-7e3a-9f10-0123456789ae",
		Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
		ToolCalls:   []steptype.ToolCall{{ID: "call_12_0", Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}},
		Fingerprint: "0123456789abcdef0123456789abcdef", Metrics: m, CreatedAt: now,
		Metadata: map[string]any{"response_model": "scripted", "finish_reason": "tool_calls"}}
	tool := &steptype.Step{ID: llm.ID, SessionID: llm.SessionID, RunID: llm.RunID, ParentID: llm.ParentID,
		Kind: steptype.KindTool, Name: "tools", Status: steptype.StepCompleted, Role: steptype.RoleTool,
		Content: "1", ToolCallID: "call_12_0", ToolName: "echo", Inputs: json.RawMessage(`{"n":1}`), Outputs: json.RawMessage(`1`),
		Fingerprint: llm.Fingerprint, Metrics: m, CreatedAt: now}
	ar := &arena{}
	b.ReportAllocs()
	for range b.N {
		newRow(llm, ar)
		newRow(tool, ar)
	}
}
