package scripted_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

// BenchmarkGenerateZeroLatency measures one tool-call turn of the benchmark
// loop model, consumed in full, for contexts of growing length (the
// selection and the usage estimate are O(messages)).
func BenchmarkGenerateZeroLatency(b *testing.B) {
	for _, n := range []int{1, 100, 1_000, 10_000} {
		b.Run("steps="+strconv.Itoa(n), func(b *testing.B) {
			m := scripted.Loop("calculator", `{"expression":"1+1"}`, 1_000_000, "done")
			msgs := []llm.Message{{Role: steptype.RoleUser, Content: "compute"}}
			for i := range n - 1 {
				id := "call_" + strconv.Itoa(i) + "_0"
				msgs = append(msgs,
					llm.Message{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: id, Name: "calculator", Arguments: []byte(`{"expression":"1+1"}`)}}},
					llm.Message{Role: steptype.RoleTool, ToolCallID: id, ToolName: "calculator", Content: "2"})
			}
			req := &llm.Request{System: "You are a calculator.", Messages: msgs}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for r, err := range m.Generate(ctx, req) {
					if err != nil || (!r.Partial && len(r.ToolCalls) != 1) {
						b.Fatal(r, err)
					}
				}
			}
		})
	}
}
