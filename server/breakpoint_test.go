package server

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// TestBreakpointsOverHTTP starts a run with breakpoints in the POST
// /v1/runs body, finds its pause among the pending inputs and answers it
// through the input endpoint with a state edit.
func TestBreakpointsOverHTTP(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello there")})
	if status, body := env.call("POST", "/v1/runs", `{"agent":"chat","input":"hi","breakpoints":{"before":["kind:robot"]}}`); status != 422 {
		t.Fatalf("bad selector: %d %s", status, body)
	}
	status, body := env.call("POST", "/v1/runs", `{"agent":"chat","input":"hi","breakpoints":{"before":["llm"]}}`)
	var created wire.RunCreated
	if status != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("start: %d %s", status, body)
	}
	id := created.Run.ID
	env.waitRun(id, steptype.RunWaiting)
	status, body = env.call("GET", "/v1/runs/"+id+"/inputs", "")
	var list wire.PendingList
	if status != 200 || json.Unmarshal(body, &list) != nil || len(list.Inputs) != 1 || list.Inputs[0].Request.Breakpoint == nil {
		t.Fatalf("inputs: %d %s", status, body)
	}
	p := list.Inputs[0]
	if bp := p.Request.Breakpoint; bp.When != "before" || bp.Step != "llm" || bp.Kind != steptype.KindLLM {
		t.Fatalf("pause %+v", bp)
	}
	path := "/v1/runs/" + id + "/inputs/" + p.RequestID
	env.problem(422, CodeInvalidAnswer, "POST", path, `{"answer":{"action":"rewind"}}`)
	env.problem(422, CodeInvalidAnswer, "POST", path, `{"answer":{"state":"x"}}`)
	if status, body := env.call("POST", path, `{"answer":{"action":"continue","state":{"seen":true}}}`); status != 200 {
		t.Fatalf("answer: %d %s", status, body)
	}
	r := env.waitRun(id, steptype.RunCompleted)
	if r.Output != "hello there" || string(r.State) != `{"seen":true}` {
		t.Fatalf("output %q state %s", r.Output, r.State)
	}
}

// TestBreakpointAGUIInterrupt: an AG-UI client (the official one) gets a
// breakpoint's pause as an interrupt that says where the run is, and
// resumes the run by answering it.
func TestBreakpointAGUIInterrupt(t *testing.T) {
	t.Parallel()
	a := toolAgent("stepper", 1, 0)
	a.Breakpoints = &stepwise.Breakpoints{Before: []string{"tools"}}
	env := newEnv(t, []*stepwise.Agent{a})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/stepper", map[string]any{
		"threadId": "thread-bp",
		"turns": []any{
			map[string]any{"message": "hi"},
			map[string]any{"resume": map[string]any{"status": "resolved", "payload": "continue"}},
		},
	})
	fin := turns[0].Events[len(turns[0].Events)-1]
	out := fin["outcome"].(map[string]any)
	ints, _ := out["interrupts"].([]any)
	if out["type"] != "interrupt" || len(ints) != 1 {
		t.Fatalf("first turn ends %v", fin)
	}
	bp, _ := ints[0].(map[string]any)["metadata"].(map[string]any)["breakpoint"].(map[string]any)
	if bp["when"] != "before" || bp["step"] != "tools" || bp["matched"] != "tools" {
		t.Fatalf("interrupt %v", ints[0])
	}
	last := turns[1].Events[len(turns[1].Events)-1]
	if last["type"] != "RUN_FINISHED" || last["outcome"].(map[string]any)["type"] != "success" || last["result"] != "done" {
		t.Fatalf("resumed turn ends %v", last)
	}
}
