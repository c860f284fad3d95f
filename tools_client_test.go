package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestClientTools: a client tool is offered to the model; its call parks
// the run as an input step in the tool-result role; the caller's answer is
// the tool result and the run resumes from there.
func TestClientTools(t *testing.T) {
	t.Parallel()
	var offered []string
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		offered = offered[:0]
		for _, d := range req.Tools {
			offered = append(offered, d.Name)
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("f1", "pick_color", `{"hint":"warm"}`)}}, nil
		}
		return &llm.Response{Content: "picked " + last.Content}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "ui", Model: model})
	ctx := context.Background()
	def := llm.ToolDef{Name: "pick_color", Description: "let the user pick", Parameters: json.RawMessage(`{"type":"object"}`)}
	if _, err := e.StartRun(ctx, stepwise.StartParams{Agent: "ui", Input: "x", ClientTools: []llm.ToolDef{def, def}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("duplicate client tool: %v", err)
	}
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "ui", Input: "choose", ClientTools: []llm.ToolDef{def}}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunWaiting || strings.Join(offered, ",") != "pick_color" {
		t.Fatalf("status %s offered %v", run.Status, offered)
	}
	pend, err := e.Pending(ctx, run.ID)
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %v", pend, err)
	}
	c, ok := stepwise.ClientToolCall(pend[0])
	if !ok || c.ID != "f1" || c.Name != "pick_color" || string(c.Arguments) != `{"hint":"warm"}` {
		t.Fatalf("client tool call %+v %v", c, ok)
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: pend[0].RequestID, Answer: json.RawMessage(`"orange"`)}); err != nil {
		t.Fatal(err)
	}
	// A restarted engine (a new execution) still knows the client tools.
	run, err = e.Wait(ctx, e.Execute(ctx, run.ID))
	if err != nil || run.Status != steptype.RunCompleted || run.Output != "picked orange" || strings.Join(offered, ",") != "pick_color" {
		t.Fatalf("run %+v %v offered %v", run, err, offered)
	}
	got := steps(t, st, run.SessionID)
	if k := strings.Join(kinds(got), ","); k != "user,llm,input,llm" || got[2].ToolCallID != "f1" || got[2].Content != "orange" {
		t.Fatalf("steps %s %+v", k, got[2])
	}
}
