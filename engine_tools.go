package stepwise

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/stepwise-run/stepwise/internal/answer"

	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/internal/runexec"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// toolDefs lists what the model may call: tools, sub-agents, ask_human.
func (x *execution) toolDefs() []llm.ToolDef {
	a := x.agent
	if len(a.Tools) == 0 && len(a.SubAgents) == 0 && len(x.clientTools) == 0 {
		return nil
	}
	defs := make([]llm.ToolDef, 0, len(a.Tools)+len(a.SubAgents)+len(x.clientTools))
	for _, t := range a.Tools {
		defs = append(defs, t.Definition())
	}
	for _, s := range a.SubAgents {
		defs = append(defs, subAgentDef(s))
	}
	for _, d := range x.clientTools {
		if len(d.Parameters) == 0 {
			d.Parameters = json.RawMessage(`{"type":"object"}`)
		}
		defs = append(defs, d)
	}
	return defs
}

// toolsStep is the built-in "tools" step: it executes every pending tool
// call of the last model response, in parallel (bounded), each committed as
// its own step as it finishes; the last commit moves the cursor to "llm".
func (x *execution) toolsStep(ctx context.Context, s *Scope) (*Next, error) {
	// The calls live in a buffer of the execution, reused by every tools
	// step (nothing keeps them once the step returns).
	pending := x.Conv.PendingToolCalls(x.buf.calls[:0])
	defer func() { x.buf.calls = pending[:0] }()
	if len(pending) == 0 {
		llmStep := StepLLM
		return &Next{committed: true}, x.Commit(nil, runexec.Update{Cursor: &llmStep})
	}
	r := toolsRound{x: x}
	run, err := x.triageCalls(&r, pending)
	if err != nil {
		return nil, err
	}
	// The cursor moves with the last result unless a call may park (a
	// sub-agent or ask_human); then it moves by itself at the end.
	for _, c := range run {
		if c.Name == AskHumanTool || x.subAgent(c.Name) != nil || x.isClientTool(c.Name) {
			r.deferCursor = true
		}
	}
	r.remaining = len(run)
	idemBase := runexec.IdemSeed{}
	if x.Conv.LastAssistant() != nil {
		idemBase = runexec.IdemSeed{RunID: x.Run.ID, Seq: x.Conv.LastAssistant().Sequence, Set: true}
	}
	// Recorded results a replay reuses commit first, in their recorded
	// order, so that a replay is the same story every time.
	if x.replay != nil {
		var live []ToolCall
		for _, o := range x.reuseTools(run) {
			if o.Step == nil {
				live = append(live, o.call)
			} else if !r.handle(&o.Outcome) {
				break
			}
		}
		run = live
	}
	switch {
	case r.firstErr != nil || len(run) == 0:
	case len(run) == 1:
		// One call: execute it on this goroutine, no hand-off.
		x.execCall(ctx, run[0], idemBase, func(o *runexec.Outcome) { r.handle(o) })
	default:
		x.execParallel(ctx, &r, run, idemBase)
	}
	return x.endTools(ctx, &r)
}

// triageCalls sorts the pending calls of a tools step (filtered in place):
// a call already asked about is left waiting, a rejected one gets its
// rejection committed as its result, one that needs approval gets an
// approval request (in r.approvals), and the rest are returned to run.
func (x *execution) triageCalls(r *toolsRound, pending []ToolCall) ([]ToolCall, error) {
	run := pending[:0]
	for _, call := range pending {
		if x.waiting[call.ID] {
			continue // already asked, still waiting
		}
		if ans, decided := x.approvals[call.ID]; decided {
			if !ans.Approved {
				msg := "The user rejected this tool call."
				if ans.Message != "" {
					msg += " Message: " + ans.Message
				}
				if err := x.Commit([]*Step{x.ToolResultStep(call, &tool.Result{Content: msg, IsError: true})}, runexec.Update{}); err != nil {
					return nil, err
				}
				continue
			}
		} else if x.needsApproval(call) {
			approval := call // its own copy: only this branch keeps a pointer
			in, err := x.inputStep(StepTools, &InputRequest{
				Prompt:   fmt.Sprintf("Approve call of tool %q with arguments %s?", call.Name, string(call.Arguments)),
				Approval: &approval,
				Schema:   answer.ApprovalSchema,
			}, nil)
			if err != nil {
				return nil, err
			}
			r.approvals = append(r.approvals, in)
			continue
		}
		run = append(run, call)
	}
	return run, nil
}

// execParallel executes the calls of a tools step in parallel, at most
// Limits.MaxParallelTools at once, handing each outcome to r.
func (x *execution) execParallel(ctx context.Context, r *toolsRound, run []ToolCall, idemBase runexec.IdemSeed) {
	runexec.ExecParallel(ctx, run, x.agent.Limits.MaxParallelTools, func(ctx context.Context, call ToolCall, send func(*runexec.Outcome)) {
		x.execCall(ctx, call, idemBase, send)
	}, r.handle)
}

// endTools ends a tools step whose calls all reported: it parks the run
// when an approval, a human or a child is awaited, or else moves the
// cursor to "llm" unless the last result moved it.
func (x *execution) endTools(ctx context.Context, r *toolsRound) (*Next, error) {
	if r.firstErr != nil {
		return nil, r.firstErr
	}
	if r.remaining > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("stepwise: %d tool calls did not complete", r.remaining)
	}
	if len(r.approvals) > 0 || r.parked || x.anyWaiting() {
		waiting := steptype.RunWaiting
		if err := x.Commit(r.approvals, runexec.Update{Status: &waiting}); err != nil {
			return nil, err
		}
		x.Publish(&Event{Type: EventRunWaiting, Run: x.RunSnapshot()})
		x.recheckChildren(r.children)
		return &Next{committed: true}, nil
	}
	if !r.moved {
		llmStep := StepLLM
		if err := x.Commit(nil, runexec.Update{Cursor: &llmStep}); err != nil {
			return nil, err
		}
	}
	return x.builtinNext(StepTools, Next{committed: true}), nil
}

// recheckChildren wakes this run if a child it parked on finished before
// the park was committed (the child's own wake-up found it still running).
func (x *execution) recheckChildren(ids []string) {
	ctx := context.WithoutCancel(x.Ctx)
	for _, id := range ids {
		if r, err := x.e.store.RunGet(ctx, &store.RunGetParams{ID: id}); err == nil && r.Status.Terminal() {
			x.e.exec.WakeParent(ctx, x.Run.ID)
			return
		}
	}
}

// reusedCall is a call of a tools step and, in a replay, the recorded
// result it reuses (Outcome.Step nil: the call runs live).
type reusedCall struct {
	runexec.Outcome
	call ToolCall
	seq  int64 // the recorded step's sequence
}

// reuseTools takes the recorded results a replay reuses for calls: the
// reused ones first, in recorded order, then the live ones in call order.
func (x *execution) reuseTools(calls []ToolCall) []reusedCall {
	out := make([]reusedCall, 0, len(calls))
	for _, call := range calls {
		rc := reusedCall{call: call}
		if x.replay != nil && call.Name != AskHumanTool && x.subAgent(call.Name) == nil {
			fp := convo.ToolFingerprint(call.Name, call.Arguments)
			if rec := x.replay.TakeTool(call.Name, fp); rec != nil {
				s := x.ToolResultStep(call, &tool.Result{Content: rec.Content, Output: rec.Outputs, IsError: rec.Error != nil})
				s.Replay, s.Fingerprint = "reused", fp
				s.Metadata = map[string]any{"replayed_from": rec.ID}
				rc.Outcome, rc.seq = runexec.Outcome{Step: s, Final: true}, rec.Sequence
			}
		}
		out = append(out, rc)
	}
	slices.SortStableFunc(out, func(a, b reusedCall) int {
		if (a.Step == nil) != (b.Step == nil) {
			if a.Step == nil {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return out
}

// commitToolStep commits a tool result; the last one moves the cursor on.
func (x *execution) commitToolStep(s *Step, completed *Event, last bool) error {
	u := runexec.Update{Patch: s.StatePatch, PatchStep: s, InPlace: true, Completed: completed} // tool results are built by the engine
	if len(s.StatePatch) > 0 {
		if err := x.checkState(s.StatePatch); err != nil {
			// The call happened; its state update cannot apply: the model
			// reads why, the state is unchanged.
			s.Content = "error: " + err.Error()
			s.StatePatch, u.Patch = nil, nil
			s.Error = &StepError{Message: err.Error(), Class: steptype.ErrorPermanent, Code: "invalid_state"}
		}
	}
	if last {
		// The tools step ends with this commit: the loop goes on to the
		// llm step.
		u.Cursor, u.Hold = &cursorLLM, true
	}
	return x.Commit(x.One(s), u)
}

func (x *execution) anyWaiting() bool {
	for _, w := range x.waiting {
		if w {
			return true
		}
	}
	return false
}

// execCall runs one call with retries, sending error steps for failed
// attempts and finally the result step.
func (x *execution) execCall(ctx context.Context, call ToolCall, idemBase runexec.IdemSeed, send func(*runexec.Outcome)) {
	if sub := x.subAgent(call.Name); sub != nil {
		if o := x.callSubAgent(ctx, sub, call); o != nil {
			send(o)
		}
		return
	}
	if call.Name == AskHumanTool {
		send(x.askHuman(call))
		return
	}
	if x.isClientTool(call.Name) {
		send(x.clientCall(call))
		return
	}
	t := x.tool(call.Name)
	if t == nil {
		send(&runexec.Outcome{Step: x.ToolResultStep(call, &tool.Result{Content: fmt.Sprintf("error: unknown tool %q", call.Name), IsError: true}), Final: true})
		return
	}
	p := runexec.ToolExec{Tool: x.observeTool(t), Call: call, IdemKey: idemBase.Key(call.ID), Answers: x.toolAnswers[call.ID],
		Retry: x.agent.Retry.exec(), Measure: !x.e.cfg.NoStepResources, Replay: x.replay != nil}
	if need := x.ExecTool(ctx, &p, send); need != nil {
		send(x.toolInput(call, need))
	}
}

func (x *execution) tool(name string) tool.Tool {
	for _, t := range x.agent.Tools {
		if t.Definition().Name == name {
			return t
		}
	}
	return nil
}

func (x *execution) subAgent(name string) *Agent {
	for _, s := range x.agent.SubAgents {
		if s.Name == name {
			if reg, err := x.e.Agent(name); err == nil {
				return reg
			}
			return s.withDefaults()
		}
	}
	return nil
}

// toolsRound is the bookkeeping of one tools step's calls.
type toolsRound struct {
	x           *execution
	remaining   int  // calls without a final outcome yet
	moved       bool // a commit moved the cursor on
	parked      bool
	deferCursor bool     // a call may park: the cursor moves at the end
	children    []string // child runs this run parks on
	approvals   []*Step  // input steps committed with the park
	firstErr    error
}

// handle commits what a call produced; it runs on the step's goroutine only.
func (r *toolsRound) handle(o *runexec.Outcome) bool {
	if r.firstErr != nil {
		return false // drain
	}
	x := r.x
	var err error
	switch {
	case o.Child != "":
		r.remaining--
		r.parked = true
		r.children = append(r.children, o.Child)
	case o.Park:
		// Committed at the end with the status change, in one
		// transaction, so an answer can never arrive before the run
		// is waiting.
		r.remaining--
		r.approvals = append(r.approvals, o.Step)
		x.waiting[o.Step.ToolCallID] = true
	case o.Final:
		r.remaining--
		last := r.remaining == 0 && !r.deferCursor && len(r.approvals) == 0 && !x.anyWaiting()
		err = x.commitToolStep(o.Step, o.Completed, last)
		r.moved = r.moved || last
	default:
		err = x.Commit([]*Step{o.Step}, runexec.Update{})
	}
	if err != nil {
		r.firstErr = err
	}
	return r.firstErr == nil
}

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
func (x *execution) clientCall(call ToolCall) *runexec.Outcome {
	s, err := x.inputStep(StepTools, &InputRequest{
		Prompt:  fmt.Sprintf("Run client tool %q", call.Name),
		Context: map[string]any{"client_tool": call.Name, "arguments": json.RawMessage(call.Arguments)},
	}, &call)
	if err != nil {
		return &runexec.Outcome{Step: x.ToolResultStep(call, toolError(err.Error())), Final: true}
	}
	s.Metadata = map[string]any{"client_tool": true}
	return &runexec.Outcome{Step: s, Park: true}
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
