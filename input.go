package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/internal/answer"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/wire"
)

// AskHumanTool is the name of the built-in tool that lets a model ask the
// user a question. Add AskHuman() to an agent's tools to offer it.
const AskHumanTool = "ask_human"

// ApprovalAnswer is the answer to a tool-call approval request.
type ApprovalAnswer = wire.ApprovalAnswer

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
		if _, err := answer.Compile(req.Schema); err != nil {
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

// toolInput turns a tool's request for input (tool.InputNeeded) into a
// waiting input step of the call: not its result (its role is none, so
// the model never sees it), but what the call waits for; answered, the
// call is made again with the answers (toolAnswers).
func (x *execution) toolInput(call ToolCall, need *tool.InputNeeded) *runexec.Outcome {
	ctx := map[string]any{}
	for k, v := range need.Context {
		ctx[k] = v
	}
	ctx["tool_call_id"], ctx["tool"] = call.ID, call.Name
	prompt := need.Prompt
	if prompt == "" {
		prompt = fmt.Sprintf("Tool %q needs your input.", call.Name)
	}
	s, err := x.inputStep(StepTools, &InputRequest{Prompt: prompt, Schema: need.Schema, Context: ctx}, nil)
	if err != nil {
		return &runexec.Outcome{Step: x.ToolResultStep(call, toolError(fmt.Sprintf("the tool asked for input with a bad request: %v", err))), Final: true}
	}
	s.ToolCallID, s.ToolName = call.ID, call.Name
	return &runexec.Outcome{Step: s, Park: true}
}

// askHuman turns an ask_human call into a waiting input step.
func (x *execution) askHuman(call ToolCall) *runexec.Outcome {
	var args struct {
		Question string          `json:"question"`
		Schema   json.RawMessage `json:"schema,omitempty"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Question == "" {
		return &runexec.Outcome{Step: x.ToolResultStep(call, toolError(`ask_human needs {"question": "..."}`)), Final: true}
	}
	s, err := x.inputStep(StepTools, &InputRequest{Prompt: args.Question, Schema: args.Schema}, &call)
	if err != nil {
		return &runexec.Outcome{Step: x.ToolResultStep(call, toolError(err.Error())), Final: true}
	}
	return &runexec.Outcome{Step: s, Park: true}
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
	if s.Kind != steptype.KindInput || s.RunID != x.Run.ID {
		return
	}
	var req InputRequest
	_ = json.Unmarshal(s.Inputs, &req)
	if req.Approval != nil && s.Status == steptype.StepCompleted {
		var a ApprovalAnswer
		_ = json.Unmarshal(s.Outputs, &a)
		x.approvals[req.Approval.ID] = a
	}
	if s.Status == steptype.StepCompleted && req.Approval == nil && s.ToolCallID != "" && s.Role == steptype.RoleNone {
		// An answer to a tool's own request (tool.InputNeeded): the call
		// is made again with it.
		if x.toolAnswers == nil {
			x.toolAnswers = map[string][]json.RawMessage{}
		}
		x.toolAnswers[s.ToolCallID] = append(x.toolAnswers[s.ToolCallID], s.Outputs)
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

// AnswerParams answer a pending input request.
type AnswerParams struct {
	RunID     string
	RequestID string // the id of the waiting input step
	// Answer is JSON: a string for free-text requests, a value valid under
	// the request's schema, or an ApprovalAnswer for approvals.
	Answer json.RawMessage
}

// PendingInput is a waiting input request.
type PendingInput = wire.PendingInput

// Pending lists waiting input requests, of one run or (runID empty) all.
func (e *Engine) Pending(ctx context.Context, runID string) ([]*PendingInput, error) {
	if runID != "" {
		if _, err := e.store.RunGet(ctx, &store.RunGetParams{ID: runID}); err != nil {
			return nil, fmt.Errorf("run %q: %w", runID, err)
		}
	}
	steps, err := e.store.StepList(ctx, &store.StepListParams{RunID: runID, Status: steptype.StepWaiting, Kinds: []steptype.Kind{steptype.KindInput}})
	if err != nil {
		return nil, fmt.Errorf("list pending inputs: %w", err)
	}
	out := make([]*PendingInput, 0, len(steps))
	for _, s := range steps {
		var req InputRequest
		if err := json.Unmarshal(s.Inputs, &req); err != nil {
			return nil, fmt.Errorf("input request %s: %w", s.ID, err)
		}
		out = append(out, &PendingInput{RequestID: s.ID, RunID: s.RunID, SessionID: s.SessionID, Request: &req, Step: s})
	}
	return out, nil
}

// Answer answers a pending input request. The answer is validated first: an
// invalid answer is refused with the validation error and the run keeps
// waiting. When the run's last pending request is answered it is queued and
// resumes at its next step; nothing that ran before the request runs again.
// Exactly one of concurrent answers to one request wins; the others get
// ErrAlreadyAnswered. A request of a sub-agent's run may be answered through
// any of its ancestor runs.
func (e *Engine) Answer(ctx context.Context, p AnswerParams) (*Step, error) {
	run, err := e.store.RunGet(ctx, &store.RunGetParams{ID: p.RunID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", p.RunID, err)
	}
	s, err := e.store.StepGet(ctx, &store.StepGetParams{ID: p.RequestID})
	if err != nil || s.Kind != steptype.KindInput || (s.RunID != run.ID && !e.proto.Descends(ctx, s.RunID, run.ID)) {
		return nil, fmt.Errorf("%w: input request %q in run %s", ErrNotFound, p.RequestID, p.RunID)
	}
	if s.RunID != run.ID {
		// A request of a sub-agent's run, answered through its ancestor
		// (the client protocol reports it there).
		if run, err = e.store.RunGet(ctx, &store.RunGetParams{ID: s.RunID}); err != nil {
			return nil, fmt.Errorf("run %q: %w", s.RunID, err)
		}
	}
	switch {
	case s.Status == steptype.StepExpired:
		return nil, fmt.Errorf("%w: request %s expired", ErrAlreadyAnswered, s.ID)
	case s.Status == steptype.StepCompleted:
		return nil, fmt.Errorf("%w: request %s", ErrAlreadyAnswered, s.ID)
	case run.Status.Terminal():
		return nil, fmt.Errorf("%w: run %s is %s; its requests can no longer be answered", ErrRunFinished, run.ID, run.Status)
	case s.Status != steptype.StepWaiting:
		return nil, fmt.Errorf("%w: request %s", ErrAlreadyAnswered, s.ID)
	}
	var req InputRequest
	if err := json.Unmarshal(s.Inputs, &req); err != nil {
		return nil, fmt.Errorf("input request %s: %w", s.ID, err)
	}
	if !req.ExpiresAt.IsZero() && e.now().After(req.ExpiresAt) {
		return nil, fmt.Errorf("%w: request %s expired at %s", ErrAlreadyAnswered, s.ID, req.ExpiresAt.Format(time.RFC3339))
	}
	content, err := answer.Check(&req, p.Answer)
	if err != nil {
		return nil, err
	}
	// From the commit to the publication, this broker holds the session's
	// pokes: the run is queued by the commit, and another instance may
	// resume it and commit its next steps before the answer is published
	// here; subscribers must not read those from the store first.
	e.broker.BeginResolution(s.SessionID)
	out, err := e.store.StepResolve(ctx, &store.StepResolveParams{
		ID: s.ID, RunID: run.ID, Status: steptype.StepCompleted, Content: content, Outputs: convo.CanonicalJSON(p.Answer), Now: e.now(), QueueRun: true,
	})
	if err != nil {
		e.broker.PublishResolution(s.SessionID, nil)
	}
	if errors.Is(err, store.ErrConflict) {
		// The step was resolved, or its run finished (a cancel closes its
		// requests in the same transaction): exactly one of them won.
		if r, gerr := e.store.RunGet(ctx, &store.RunGetParams{ID: run.ID}); gerr == nil && r.Status.Terminal() {
			return nil, fmt.Errorf("%w: run %s is %s; its requests can no longer be answered", ErrRunFinished, run.ID, r.Status)
		}
		return nil, fmt.Errorf("%w: request %s", ErrAlreadyAnswered, s.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	if testHookAnswerPublish != nil {
		testHookAnswerPublish()
	}
	e.broker.PublishResolution(s.SessionID, &Event{Type: EventStepCompleted, SessionID: out.SessionID, RunID: out.RunID, Step: out, Time: e.now()})
	e.wake()
	return out, nil
}

// expireInputs applies the expiry outcome of overdue requests
// (answer.Expire): a default answer, or the run's failure, announced.
func (e *Engine) expireInputs(ctx context.Context) {
	now := e.now()
	answer.Expire(ctx, e.store, now, e.wake, func(r *Run, serr *StepError) {
		e.broker.Publish(&Event{Type: EventRunFinished, SessionID: r.SessionID, RunID: r.ID, Run: r, Time: now})
		e.observeRunFinished(r, serr)
	})
}

// testHookAnswerPublish, when set (tests), runs between an answer's commit and
// its publication.
var testHookAnswerPublish func()
