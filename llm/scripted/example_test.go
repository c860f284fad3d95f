package scripted_test

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

func Example() {
	m, err := scripted.Parse("demo.yaml", []byte(`
turns:
  - tool_calls:
      - name: calculator
        arguments: {expression: "6*7"}
  - text: The answer is 42.
    chunk: 6
`))
	if err != nil {
		panic(err)
	}
	req := &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: "What is 6*7?"}}}
	for r, err := range m.Generate(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		if !r.Partial {
			fmt.Printf("%s asks for %s %s (id %s)\n", m.Name(), r.ToolCalls[0].Name, r.ToolCalls[0].Arguments, r.ToolCalls[0].ID)
			req.Messages = append(req.Messages,
				llm.Message{Role: steptype.RoleAssistant, ToolCalls: r.ToolCalls},
				llm.Message{Role: steptype.RoleTool, ToolCallID: r.ToolCalls[0].ID, Content: "42"})
		}
	}
	for r, err := range m.Generate(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		if r.Partial {
			fmt.Printf("delta %q\n", r.Content)
		} else {
			fmt.Printf("final %q, %s, %d output tokens\n", r.Content, r.FinishReason, r.Usage.OutputTokens)
		}
	}
	// Output:
	// scripted:demo asks for calculator {"expression":"6*7"} (id call_0_0)
	// delta "The an"
	// delta "swer i"
	// delta "s 42."
	// final "The answer is 42.", stop, 5 output tokens
}

func ExampleLoop() {
	m := scripted.Loop("clock", "", 5000, "done") // 5,000 tool calls, then "done"
	req := &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: "tick"}}}
	for r := range m.Generate(context.Background(), req) {
		if !r.Partial {
			fmt.Println(r.FinishReason, r.ToolCalls[0].Name, r.ToolCalls[0].ID)
		}
	}
	// Output: tool_calls clock call_0_0
}
