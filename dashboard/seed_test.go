package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// seedLong ingests an n-step session recorded by an agent running
// elsewhere: a user message, then model calls and tool results, a
// sub-agent exchange (hop 1) every 40 steps and a failed attempt every 100,
// retried after a 2 s back-off.
func seedLong(tb testing.TB, e *env, n int) string {
	tb.Helper()
	ctx := context.Background()
	sess, err := e.eng.CreateSession(ctx, "bulk", fmt.Sprintf("%d-step session", n))
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	var batch []*stepwise.Step
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := e.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: batch}); err != nil {
			tb.Fatal(err)
		}
		batch = nil
	}
	add := func(s *stepwise.Step) {
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		s.Metrics.StartedAt = t0
		t0 = t0.Add(s.Metrics.Duration)
		s.Metrics.FinishedAt = t0
		s.CreatedAt = t0
		batch = append(batch, s)
		if len(batch) == 1000 {
			flush()
		}
	}
	add(&stepwise.Step{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: "Crawl the catalogue and summarize every product."})
	count := 1
	for i := 0; count < n-1; i++ {
		tool := []string{"search", "fetch_page", "extract"}[i%3]
		id := fmt.Sprintf("call_%d", i)
		args := json.RawMessage(fmt.Sprintf(`{"page":%d,"query":"product %d"}`, i%25, i))
		switch {
		case i%40 == 39 && count+2 <= n-1:
			add(&stepwise.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Hop: 1, Content: fmt.Sprintf("Sub-agent summary %d", i),
				Metrics: steptype.Metrics{Duration: 800 * time.Millisecond, InputTokens: 900, OutputTokens: 120, Cost: 0.0011, Model: "scripted:writer"}})
			add(&stepwise.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Hop: 1, Content: "Done.",
				Metrics: steptype.Metrics{Duration: 300 * time.Millisecond, InputTokens: 1000, OutputTokens: 12, Cost: 0.0009, Model: "scripted:writer"}})
			count += 2
		case i%100 == 99:
			add(&stepwise.Step{Kind: steptype.KindError, Name: "llm", Status: steptype.StepFailed,
				Error:   &steptype.StepError{Message: "429 Too Many Requests", Class: steptype.ErrorTransient, Attempt: 1, Recoverable: true, Code: "rate_limited"},
				Metrics: steptype.Metrics{Duration: 50 * time.Millisecond, Attempt: 1}})
			t0 = t0.Add(2 * time.Second) // the retry's back-off
			count++
		case count+2 <= n-1:
			add(&stepwise.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: fmt.Sprintf("Looking at item %d.", i),
				ToolCalls:   []steptype.ToolCall{{ID: id, Name: tool, Arguments: args}},
				Annotations: steptype.Annotations{State: fmt.Sprintf("catalogue page %d", i%5)},
				Metrics:     steptype.Metrics{Duration: 1200 * time.Millisecond, FirstTokenLatency: 300 * time.Millisecond, InputTokens: 1500 + int64(i%500), OutputTokens: 60, Cost: 0.0021, Model: "scripted:crawler", Provider: "scripted"}})
			add(&stepwise.Step{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: id, ToolName: tool, Inputs: args,
				Content: fmt.Sprintf(`{"items":[%d,%d],"ok":true}`, i, i+1), Outputs: json.RawMessage(fmt.Sprintf(`{"items":[%d,%d],"ok":true}`, i, i+1)),
				Metrics: steptype.Metrics{Duration: 150 * time.Millisecond}})
			count += 2
		default:
			add(&stepwise.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: fmt.Sprintf("Thinking about item %d.", i),
				Metrics: steptype.Metrics{Duration: 400 * time.Millisecond, InputTokens: 1600, OutputTokens: 20, Cost: 0.001}})
			count++
		}
	}
	add(&stepwise.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "All products are summarized.",
		Metrics: steptype.Metrics{Duration: 900 * time.Millisecond, InputTokens: 2000, OutputTokens: 200, Cost: 0.003}})
	flush()
	got, err := e.st.StepCount(ctx, &store.StepCountParams{SessionID: sess.ID})
	if err != nil || got != int64(n) {
		tb.Fatalf("seeded %d steps, want %d (%v)", got, n, err)
	}
	return sess.ID
}

// askerAgent asks the user for structured input with ask_human, then
// answers with what it got.
func askerAgent() *stepwise.Agent {
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","maxLength":40,"description":"Who is asking"},"copies":{"type":"integer","minimum":1},"color":{"enum":["red","green","blue"]},"rush":{"type":"boolean"}},"required":["name","copies"]}`)
	m := scripted.New("asker", scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{Name: stepwise.AskHumanTool, Arguments: json.RawMessage(`{"question":"How many copies, and for whom?","schema":` + string(schema) + `}`)}}},
		{Text: "Printing the copies now."},
	}})
	return &stepwise.Agent{Name: "asker", Model: m, Tools: []tool.Tool{stepwise.AskHuman()}}
}

// deployerAgent calls a deploy tool that needs an approval.
func deployerAgent(deployed *int) *stepwise.Agent {
	m := scripted.New("deployer", scripted.Script{Turns: []scripted.Turn{
		{Text: "I will deploy.", ToolCalls: []steptype.ToolCall{{Name: "deploy", Arguments: json.RawMessage(`{"env":"prod","version":"1.4.2"}`)}}},
		{Text: "Deployed 1.4.2 to prod."},
	}})
	deploy := tool.Func(llm.ToolDef{Name: "deploy", Description: "Deploy a version", Parameters: json.RawMessage(`{"type":"object","properties":{"env":{"type":"string"},"version":{"type":"string"}}}`)},
		func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
			*deployed++
			return &tool.Result{Content: "deployed"}, nil
		})
	return &stepwise.Agent{Name: "deployer", Model: m, Tools: []tool.Tool{deploy}, Approvals: map[string]stepwise.ApprovalPolicy{"deploy": stepwise.ApproveAlways}}
}

// chatAgent answers twice with a calculator call in between.
func chatAgent() *stepwise.Agent {
	m := scripted.New("chat", scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Text: "Let me compute.", ToolCalls: []steptype.ToolCall{{Name: "calc", Arguments: json.RawMessage(`{"expr":"6*7"}`)}}},
		{Text: "The answer is 42."},
	}})
	calc := tool.Func(llm.ToolDef{Name: "calc", Description: "Compute", Parameters: json.RawMessage(`{"type":"object","properties":{"expr":{"type":"string"}}}`)},
		func(ctx context.Context, c *tool.Call) (*tool.Result, error) { return &tool.Result{Content: "42"}, nil })
	return &stepwise.Agent{Name: "chat", Model: m, Tools: []tool.Tool{calc}}
}

// runToEnd starts a run and waits until it is finished or waiting.
func runUntil(tb testing.TB, e *env, agent, input string, want ...steptype.RunStatus) *stepwise.Run {
	tb.Helper()
	ctx := context.Background()
	r, err := e.eng.StartRun(ctx, stepwise.StartParams{Agent: agent, Input: input})
	if err != nil {
		tb.Fatal(err)
	}
	return waitRun(tb, e, r.ID, want...)
}

// waitRun polls a run until it reaches one of the wanted statuses.
func waitRun(tb testing.TB, e *env, runID string, want ...steptype.RunStatus) *stepwise.Run {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: runID})
		if err != nil {
			tb.Fatal(err)
		}
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("run %s is %s, want one of %v", runID, r.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
