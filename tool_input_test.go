package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// TestToolInputNeeded: a tool that needs a person's answer (tool.InputNeeded)
// parks the run with a waiting request carrying its prompt, schema and
// context; a bad answer changes nothing; answered, the call is made again
// with the same idempotency key and the answers so far, asks a second time,
// and finishes with the second answer. The requests are not messages: the
// model sees the call's one result.
func TestToolInputNeeded(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`)
	var mu sync.Mutex
	var calls []*tool.Call
	book := tool.Func(llm.ToolDef{Name: "book", Parameters: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		switch len(c.Answers) {
		case 0:
			return nil, &tool.InputNeeded{Prompt: "How many people?", Schema: schema, Context: map[string]any{"server": "booking"}}
		case 1:
			return nil, &tool.InputNeeded{Prompt: "Any note?"}
		}
		return &tool.Result{Content: "booked for " + string(c.Answers[0]) + " note " + string(c.Answers[1]), Output: json.RawMessage(`{"booked":true}`)}, nil
	})
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("b1", "book", `{"day":"friday"}`)}}, nil
		}
		return &llm.Response{Content: "done: " + last.Content}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "booker", Model: model, Tools: []tool.Tool{book}})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "booker", Input: "book friday"}))
	if err != nil || run.Status != steptype.RunWaiting {
		t.Fatalf("first execution: %v %+v", err, run)
	}
	pend, err := e.Pending(ctx, run.ID)
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %d", err, len(pend))
	}
	p := pend[0]
	if p.Request.Prompt != "How many people?" || string(p.Request.Schema) != string(schema) ||
		p.Request.Context["server"] != "booking" || p.Request.Context["tool_call_id"] != "b1" || p.Request.Context["tool"] != "book" {
		t.Fatalf("request %+v", p.Request)
	}
	if p.Step.ToolCallID != "b1" || p.Step.Role != steptype.RoleNone || p.Step.ToolName != "book" {
		t.Fatalf("input step: call %q role %q tool %q", p.Step.ToolCallID, p.Step.Role, p.Step.ToolName)
	}
	for _, bad := range []string{`{"size":0}`, `"four"`, `{}`} {
		if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: p.RequestID, Answer: json.RawMessage(bad)}); !errors.Is(err, stepwise.ErrInvalidAnswer) {
			t.Fatalf("answer %s: %v", bad, err)
		}
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: p.RequestID, Answer: json.RawMessage(`{"size":4}`)}); err != nil {
		t.Fatal(err)
	}
	if run, err = e.Wait(ctx, e.Execute(ctx, run.ID)); err != nil || run.Status != steptype.RunWaiting {
		t.Fatalf("second execution: %v %+v", err, run)
	}
	pend, _ = e.Pending(ctx, run.ID)
	if len(pend) != 1 || pend[0].Request.Prompt != "Any note?" {
		t.Fatalf("second request %+v", pend)
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: pend[0].RequestID, Answer: json.RawMessage(`"window seat"`)}); err != nil {
		t.Fatal(err)
	}
	if run, err = e.Wait(ctx, e.Execute(ctx, run.ID)); err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("third execution: %v %+v", err, run)
	}
	if run.Output != `done: booked for {"size":4} note "window seat"` {
		t.Fatalf("output %q", run.Output)
	}
	if len(calls) != 3 || calls[0].IdempotencyKey == "" || calls[1].IdempotencyKey != calls[0].IdempotencyKey || calls[2].IdempotencyKey != calls[0].IdempotencyKey {
		t.Fatalf("%d calls, keys %v", len(calls), keys(calls))
	}
	if len(calls[1].Answers) != 1 || len(calls[2].Answers) != 2 {
		t.Fatalf("answers per call: %d %d", len(calls[1].Answers), len(calls[2].Answers))
	}
	steps, err := st.StepList(ctx, &store.StepListParams{SessionID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	results := 0
	for _, s := range steps {
		kinds = append(kinds, string(s.Kind))
		if s.Kind == steptype.KindTool && s.ToolCallID == "b1" {
			results++
			if string(s.Outputs) != `{"booked":true}` {
				t.Errorf("tool step outputs %s", s.Outputs)
			}
		}
	}
	if results != 1 || strings.Join(kinds, ",") != "user,llm,input,input,tool,llm" {
		t.Fatalf("steps %v (%d results of b1)", kinds, results)
	}
}

func keys(calls []*tool.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.IdempotencyKey)
	}
	return out
}
