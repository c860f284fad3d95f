package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// AskHumanTool is the name of the built-in tool that lets a model ask the
// user a question. Add AskHuman() to an agent's tools to offer it.
const AskHumanTool = "ask_human"

// approvalSchema is the answer schema of a tool-call approval.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"message":{"type":"string"},"always":{"type":"boolean"}},"required":["approved"],"additionalProperties":false}`)

// ApprovalAnswer is the answer to a tool-call approval request.
type ApprovalAnswer struct {
	Approved bool   `json:"approved"`
	Message  string `json:"message,omitempty"` // shown to the model on rejection
	Always   bool   `json:"always,omitempty"`  // allow this tool for the rest of the session
}

// inputStep builds a waiting input step. For ask_human (call set) the step
// plays the tool-result role, so its answer becomes the tool result.
func (x *execution) inputStep(name string, req *InputRequest, call *ToolCall) (*Step, error) {
	if req.ExpiresAfter > 0 {
		req.ExpiresAt = x.e.now().Add(req.ExpiresAfter)
		if req.OnExpire == "" {
			req.OnExpire = "fail"
		}
	}
	if len(req.Schema) > 0 {
		if _, err := compileSchema(req.Schema); err != nil {
			return nil, fmt.Errorf("input request schema: %w", err)
		}
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("input request: %w", err)
	}
	s := &Step{Kind: steptype.KindInput, Name: name, Status: steptype.StepWaiting, Inputs: in, Content: ""}
	if call != nil {
		s.Role, s.ToolCallID, s.ToolName = steptype.RoleTool, call.ID, call.Name
	}
	s.Metrics.StartedAt = x.e.now()
	return s, nil
}

// askHuman turns an ask_human call into a waiting input step.
func (x *execution) askHuman(call ToolCall) *outcome {
	var args struct {
		Question string          `json:"question"`
		Schema   json.RawMessage `json:"schema,omitempty"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Question == "" {
		return &outcome{step: x.toolResultStep(call, toolError(`ask_human needs {"question": "..."}`)), final: true}
	}
	s, err := x.inputStep(StepTools, &InputRequest{Prompt: args.Question, Schema: args.Schema}, &call)
	if err != nil {
		return &outcome{step: x.toolResultStep(call, toolError(err.Error())), final: true}
	}
	return &outcome{step: s, park: true}
}

func (x *execution) needsApproval(call ToolCall) bool {
	p, ok := x.agent.Approvals[call.Name]
	if !ok {
		p = x.agent.Approvals["*"] // the policy of every other tool
	}
	if p != ApproveAlways {
		return false
	}
	return !x.allowed[call.Name]
}

// allowedBy returns the tool an answered approval step allowed "always"
// for the session.
func allowedBy(s *Step) (string, bool) {
	if s.Kind != steptype.KindInput || s.Status != steptype.StepCompleted {
		return "", false
	}
	var req InputRequest
	_ = json.Unmarshal(s.Inputs, &req)
	if req.Approval == nil {
		return "", false
	}
	var a ApprovalAnswer
	_ = json.Unmarshal(s.Outputs, &a)
	return req.Approval.Name, a.Always && a.Approved
}

// noteRunInput records an input step of the run: an approval decision, or
// a request still waiting.
func (x *execution) noteRunInput(s *Step) {
	if s.Kind != steptype.KindInput || s.RunID != x.run.ID {
		return
	}
	var req InputRequest
	_ = json.Unmarshal(s.Inputs, &req)
	if req.Approval != nil && s.Status == steptype.StepCompleted {
		var a ApprovalAnswer
		_ = json.Unmarshal(s.Outputs, &a)
		x.approvals[req.Approval.ID] = a
	}
	if s.Status == steptype.StepWaiting {
		if req.Approval != nil {
			x.waiting[req.Approval.ID] = true
		} else if s.ToolCallID != "" {
			x.waiting[s.ToolCallID] = true
		}
	}
}

// AskHuman returns the built-in ask_human tool. The engine handles its
// calls itself: the run parks with an input step until the user answers, and
// the answer becomes the tool result.
func AskHuman() tool.Tool { return askHumanTool{} }

type askHumanTool struct{}

func (askHumanTool) Definition() llm.ToolDef {
	return llm.ToolDef{
		Name:        AskHumanTool,
		Description: "Ask the human user a question and wait for the answer. Use when you need information or a decision only the user can give.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"The question to ask"}},"required":["question"],"additionalProperties":false}`),
	}
}

func (askHumanTool) Call(context.Context, *tool.Call) (*tool.Result, error) {
	return nil, errors.New("stepwise: ask_human is handled by the engine")
}
