package stepwise

import (
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Client tools are tools a run's caller executes, not the engine: a front
// end's tools (AG-UI's RunAgentInput.tools), or any program that starts a
// run with StartParams.ClientTools. They are offered to the model with the
// agent's tools; a call to one parks the run as a waiting input step that
// plays the tool-result role (like ask_human), answered with the tool's
// result by Answer. They are stored with the run, so the run survives
// restarts and can be resumed on any instance.

// checkClientTools validates client tools against the agent's own.
func checkClientTools(a *Agent, defs []llm.ToolDef) error {
	seen := map[string]bool{AskHumanTool: true}
	for _, t := range a.Tools {
		seen[t.Definition().Name] = true
	}
	for _, s := range a.SubAgents {
		seen[s.Name] = true
	}
	for i, d := range defs {
		switch {
		case d.Name == "":
			return fmt.Errorf("%w: client tool %d has no name", store.ErrInvalid, i)
		case seen[d.Name]:
			return fmt.Errorf("%w: client tool %q is already a tool of agent %q or named twice", store.ErrInvalid, d.Name, a.Name)
		case len(d.Parameters) > 0 && !json.Valid(d.Parameters):
			return fmt.Errorf("%w: client tool %q: parameters are not JSON", store.ErrInvalid, d.Name)
		}
		seen[d.Name] = true
	}
	return nil
}

// isClientTool reports whether name is a client tool of the run.
func (x *execution) isClientTool(name string) bool {
	for _, d := range x.clientTools {
		if d.Name == name {
			return true
		}
	}
	return false
}

// clientCall parks a call of a client tool as a waiting input step whose
// answer is the tool's result.
func (x *execution) clientCall(call ToolCall) *outcome {
	s, err := x.inputStep(StepTools, &InputRequest{
		Prompt:  fmt.Sprintf("Run client tool %q", call.Name),
		Context: map[string]any{"client_tool": call.Name, "arguments": json.RawMessage(call.Arguments)},
	}, &call)
	if err != nil {
		return &outcome{step: x.toolResultStep(call, toolError(err.Error())), final: true}
	}
	s.Metadata = map[string]any{"client_tool": true}
	return &outcome{step: s, park: true}
}

// ClientToolCall reports whether a pending input request is a call of a
// client tool (its answer is the tool's result) and returns the call.
func ClientToolCall(p *PendingInput) (ToolCall, bool) {
	if p == nil || p.Request == nil || p.Step == nil || p.Step.Role != steptype.RoleTool {
		return ToolCall{}, false
	}
	name, _ := p.Request.Context["client_tool"].(string)
	if name == "" {
		return ToolCall{}, false
	}
	args, _ := json.Marshal(p.Request.Context["arguments"])
	return ToolCall{ID: p.Step.ToolCallID, Name: name, Arguments: args}, true
}
