package stepwise_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/store/memory"
)

// The step-by-step client loop: initiate a run, pull its steps one by one, answer human
// input requests, stop at the result.
func Example_clientProtocol() {
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("q1", stepwise.AskHumanTool, `{"question":"Delete user 12345?"}`)}}, nil
		}
		return &llm.Response{Content: "The human said: " + last.Content}, nil
	}}
	engine, _ := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{
		{Name: "my-agent", Model: model, Tools: []stepwise.Tool{stepwise.AskHuman()}},
	}})
	defer engine.Close()

	ctx := context.Background()
	client := engine.Client()
	inv, err := client.Initiate(ctx, "my-agent", "clean up inactive users")
	if err != nil {
		panic(err)
	}
	for {
		step, err := client.NextStep(ctx, inv)
		if err != nil {
			panic(err)
		}
		switch s := step.(type) {
		case *stepwise.Result:
			fmt.Println("Final result:", s.Value)
			return
		case *stepwise.HumanInputRequest:
			fmt.Println("Asked:", s.Prompt)
			answer, _ := json.Marshal("yes, go ahead")
			if err := client.ProvideHumanInput(ctx, inv, s.RequestID, answer); err != nil {
				panic(err)
			}
		case *stepwise.Continuation:
			// progress: s.CurrentStep, s.Progress
		case *stepwise.Error:
			fmt.Println("Failed:", s.Message)
			return
		}
	}
	// Output:
	// Asked: Delete user 12345?
	// Final result: The human said: yes, go ahead
}
