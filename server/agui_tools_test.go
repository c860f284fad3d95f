package server

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// funcModel answers each request with fn (one final response, no deltas).
type funcModel struct {
	fn func(req *llm.Request) *llm.Response
}

func (m funcModel) Name() string { return "func:test" }
func (m funcModel) Generate(_ context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) { yield(m.fn(req), nil) }
}

// TestAGUIFrontendTools: a tool declared in RunAgentInput.tools is offered
// to the model; its call ends the response with RUN_FINISHED {success,
// pendingToolCallIds}; the front end's tool message on the next run
// answers it and the run resumes with it as the tool result.
func TestAGUIFrontendTools(t *testing.T) {
	t.Parallel()
	var offered []string
	m := funcModel{fn: func(req *llm.Request) *llm.Response {
		offered = offered[:0]
		for _, d := range req.Tools {
			offered = append(offered, d.Name)
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == steptype.RoleUser {
			return &llm.Response{ToolCalls: []steptype.ToolCall{{ID: "fc1", Name: "pick_color", Arguments: json.RawMessage(`{"hint":"warm"}`)}}}
		}
		return &llm.Response{Content: "You picked " + last.Content + "."}
	}}
	env := newEnv(t, []*stepwise.Agent{{Name: "painter", Model: m}})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/painter", map[string]any{
		"threadId": "thread-frontend",
		"tools":    []any{map[string]any{"name": "pick_color", "description": "let the user pick a color", "parameters": map[string]any{"type": "object"}}},
		"turns":    []any{map[string]any{"message": "paint it"}, map[string]any{"toolResult": "orange"}},
	})
	if len(turns) != 2 {
		t.Fatalf("%d turns", len(turns))
	}
	if strings.Join(offered, ",") != "pick_color" {
		t.Fatalf("offered %v", offered)
	}
	if s := turns[0].Summary; s["outcome"] != "success" || mustJSON(t, s["pendingToolCallIds"]) != `["fc1"]` {
		t.Fatalf("first turn: %v", s)
	}
	got := collapse(eventTypes(turns[0].Events))
	if want := "RUN_STARTED STATE_SNAPSHOT STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED STEP_STARTED STEP_FINISHED RUN_FINISHED"; got != want {
		t.Fatalf("first turn events:\n got %s\nwant %s", got, want)
	}
	s := turns[1].Summary
	if s["result"] != "You picked orange." || s["outcome"] != "success" {
		t.Fatalf("second turn: %v", s)
	}
	var roles []string
	for _, msg := range s["messages"].([]any) {
		roles = append(roles, msg.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("messages %v", s["messages"])
	}
	steps, err := env.store.StepList(context.Background(), &store.StepListParams{SessionID: "thread-frontend"})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, st := range steps {
		ks = append(ks, string(st.Kind)+":"+string(st.Status))
	}
	if strings.Join(ks, ",") != "user:completed,llm:completed,input:completed,llm:completed" || steps[2].Content != "orange" || steps[2].ToolCallID != "fc1" {
		t.Fatalf("steps %v %+v", ks, steps[2])
	}
}

// TestAGUIParallelCallsOneMessage: the parallel tool calls of a text-less
// model step share one parentMessageId, so the client shows one assistant
// message holding both calls.
func TestAGUIParallelCallsOneMessage(t *testing.T) {
	t.Parallel()
	echo := tool.Func(llm.ToolDef{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "echo " + string(c.Arguments)}, nil
	})
	m := funcModel{fn: func(req *llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == steptype.RoleUser {
			return &llm.Response{ToolCalls: []steptype.ToolCall{{ID: "p1", Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}, {ID: "p2", Name: "echo", Arguments: json.RawMessage(`{"n":2}`)}}}
		}
		return &llm.Response{Content: "both done"}
	}}
	env := newEnv(t, []*stepwise.Agent{{Name: "par", Model: m, Tools: []tool.Tool{echo}}})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/par", map[string]any{"threadId": "thread-par", "turns": []any{map[string]any{"message": "go"}}})
	parents := map[any]int{}
	for _, e := range turns[0].Events {
		if e["type"] == "TOOL_CALL_START" {
			parents[e["parentMessageId"]]++
		}
	}
	if len(parents) != 1 || parents[nil] != 0 {
		t.Fatalf("TOOL_CALL_START parents %v", parents)
	}
	var calls []int
	for _, msg := range turns[0].Summary["messages"].([]any) {
		mm := msg.(map[string]any)
		if mm["role"] == "assistant" && mm["toolCalls"] != nil {
			calls = append(calls, len(mm["toolCalls"].([]any)))
		}
	}
	if len(calls) != 1 || calls[0] != 2 {
		t.Fatalf("assistant messages with tool calls: %v", calls)
	}
}

// TestAGUICatchUpFramesSteps: steps translated from the store (no
// step-started events, as when the stream catches up) are still framed by
// STEP_STARTED / STEP_FINISHED, and the calls of a text-less step have a
// parent message.
func TestAGUICatchUpFramesSteps(t *testing.T) {
	var types []string
	var parent string
	tr := &aguiTranslator{emit: func(ev *aguiEvent) {
		types = append(types, ev.Type)
		if ev.Type == aguiToolStart {
			parent = ev.ParentMessageID
		}
	}}
	tr.step(&stepwise.Step{ID: "u", Sequence: 1, Kind: steptype.KindUser, Name: "input", Role: steptype.RoleUser, Content: "hi"})
	tr.step(&stepwise.Step{ID: "l1", Sequence: 2, Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant,
		ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{}`)}}})
	tr.step(&stepwise.Step{ID: "t1", Sequence: 3, Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: "c1", Content: "ok", Status: steptype.StepCompleted})
	tr.step(&stepwise.Step{ID: "l2", Sequence: 4, Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "done"})
	tr.closeStep()
	want := "STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED STEP_STARTED TOOL_CALL_RESULT STEP_FINISHED " +
		"STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if parent != "l1" {
		t.Fatalf("parentMessageId %q, want the step id", parent)
	}
}
