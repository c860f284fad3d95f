package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/store"
)

// Frontend tools (AG-UI RunAgentInput.tools) are the run's client tools:
// offered to the model; a call to one parks the run on an input step, the
// response ends with RUN_FINISHED {outcome: success, pendingToolCallIds}
// (AG-UI's frontend-tool contract), and the next RunAgentInput of the
// thread carrying a tool message for that call id answers it: the run
// resumes with the front end's result as the tool result.

// aguiTool is one AG-UI tool declaration.
type aguiTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// clientTools converts RunAgentInput.tools.
func clientTools(raw []json.RawMessage) ([]llm.ToolDef, error) {
	out := make([]llm.ToolDef, 0, len(raw))
	for i, b := range raw {
		var t aguiTool
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "tools[%d]: %s", i, trimJSONPrefix(err))
		}
		if t.Name == "" {
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "tools[%d] has no name", i)
		}
		out = append(out, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return out, nil
}

// toolMessages returns the content of the tool messages of an input, by
// tool-call id.
func toolMessages(msgs []json.RawMessage) map[string]string {
	out := map[string]string{}
	for _, b := range msgs {
		var m struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"toolCallId"`
			Content    json.RawMessage `json:"content"`
		}
		if json.Unmarshal(b, &m) != nil || m.Role != "tool" || m.ToolCallID == "" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content)
		}
		out[m.ToolCallID] = s
	}
	return out
}

// frontendResults turns the tool messages of an input that answer pending
// frontend-tool calls of the thread into resume entries. The history the
// client re-sends holds older tool messages too; only pending calls count.
func (s *Server) frontendResults(ctx context.Context, in *aguiInput) ([]aguiResume, map[string]bool, error) {
	results := toolMessages(in.Messages)
	if len(results) == 0 {
		return nil, nil, nil
	}
	pending, err := s.sessionPending(ctx, in.ThreadID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	var out []aguiResume
	ids := map[string]bool{}
	for _, p := range sortedPending(pending) {
		call, ok := stepwise.ClientToolCall(p)
		if !ok {
			continue
		}
		content, ok := results[call.ID]
		if !ok {
			continue
		}
		payload, _ := json.Marshal(content)
		out = append(out, aguiResume{InterruptID: p.RequestID, Status: "resolved", Payload: payload})
		ids[p.RequestID] = true
	}
	return out, ids, nil
}

// splitPending separates frontend-tool calls (their tool-call ids) from
// the other pending requests (AG-UI interrupts).
func splitPending(pending map[string]*stepwise.PendingInput) (calls []string, others []*stepwise.PendingInput) {
	for _, p := range sortedPending(pending) {
		if c, ok := stepwise.ClientToolCall(p); ok {
			calls = append(calls, c.ID)
			continue
		}
		others = append(others, p)
	}
	return calls, others
}
