package stepwise

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stepwise-run/stepwise/internal/runexec"
	"slices"
	"strconv"
	"sync"

	"github.com/stepwise-run/stepwise/internal/attach"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/internal/stepres"
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

// errSiblingFailed cancels the calls of a tools step once the commit of
// one of them failed.
var errSiblingFailed = errors.New("stepwise: a sibling tool call's commit failed")

// outcome is what a tool worker hands to the run goroutine for commit.
type outcome struct {
	step  *Step
	final bool   // the call is done (step is its result)
	park  bool   // the call needs a human: step is a waiting input step
	child string // a child run that parked waiting for input
	// completed is the zero event allocated with step (toolResult), for
	// its step_completed event; nil: a new one.
	completed *Event
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
	idemBase := idemSeed{}
	if x.Conv.LastAssistant() != nil {
		idemBase = idemSeed{runID: x.Run.ID, seq: x.Conv.LastAssistant().Sequence, set: true}
	}
	// Recorded results a replay reuses commit first, in their recorded
	// order, so that a replay is the same story every time.
	if x.replay != nil {
		var live []ToolCall
		for _, o := range x.reuseTools(run) {
			if o.step == nil {
				live = append(live, o.call)
			} else if !r.handle(&o.outcome) {
				break
			}
		}
		run = live
	}
	switch {
	case r.firstErr != nil || len(run) == 0:
	case len(run) == 1:
		// One call: execute it on this goroutine, no hand-off.
		x.execCall(ctx, run[0], idemBase, r.handle)
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
				if err := x.Commit([]*Step{x.toolResultStep(call, &tool.Result{Content: msg, IsError: true})}, runexec.Update{}); err != nil {
					return nil, err
				}
				continue
			}
		} else if x.needsApproval(call) {
			approval := call // its own copy: only this branch keeps a pointer
			in, err := x.inputStep(StepTools, &InputRequest{
				Prompt:   fmt.Sprintf("Approve call of tool %q with arguments %s?", call.Name, string(call.Arguments)),
				Approval: &approval,
				Schema:   approvalSchema,
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
// Limits.MaxParallelTools at once, handing each outcome to r on this
// goroutine. A failed commit cancels the sibling calls: their results
// could not be committed anyway (the step re-runs them).
func (x *execution) execParallel(ctx context.Context, r *toolsRound, run []ToolCall, idemBase idemSeed) {
	ctx, cancelCalls := context.WithCancelCause(ctx)
	defer cancelCalls(nil)
	results := make(chan *outcome)
	send := func(o *outcome) bool {
		select {
		case results <- o:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, x.agent.Limits.MaxParallelTools)
	for _, call := range run {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			x.execCall(ctx, call, idemBase, send)
		}()
	}
	go func() { wg.Wait(); close(results) }()
	for o := range results {
		if !r.handle(o) {
			cancelCalls(errSiblingFailed)
		}
	}
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
// result it reuses (outcome.step nil: the call runs live).
type reusedCall struct {
	outcome
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
			if rec := x.replay.takeTool(call.Name, fp); rec != nil {
				s := x.toolResultStep(call, &tool.Result{Content: rec.Content, Output: rec.Outputs, IsError: rec.Error != nil})
				s.Replay, s.Fingerprint = "reused", fp
				s.Metadata = map[string]any{"replayed_from": rec.ID}
				rc.outcome, rc.seq = outcome{step: s, final: true}, rec.Sequence
			}
		}
		out = append(out, rc)
	}
	slices.SortStableFunc(out, func(a, b reusedCall) int {
		if (a.step == nil) != (b.step == nil) {
			if a.step == nil {
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
func (x *execution) execCall(ctx context.Context, call ToolCall, idemBase idemSeed, send func(*outcome) bool) {
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
	fp := convo.ToolFingerprint(call.Name, call.Arguments)
	t := x.tool(call.Name)
	if t == nil {
		send(&outcome{step: x.toolResultStep(call, &tool.Result{Content: fmt.Sprintf("error: unknown tool %q", call.Name), IsError: true}), final: true})
		return
	}
	idemKey := idemBase.key(call.ID)
	pol := x.agent.Retry
	for attempt := 1; ; attempt++ {
		start := x.e.now()
		var mark stepres.Mark
		if !x.e.cfg.NoStepResources {
			mark = stepres.Start()
		}
		res, err := callTool(ctx, x.observeTool(t), &tool.Call{
			ID: call.ID, Name: call.Name, Arguments: call.Arguments, IdempotencyKey: idemKey,
			SessionID: x.Run.SessionID, RunID: x.Run.ID, Attempt: attempt, Answers: x.toolAnswers[call.ID],
		})
		use := mark.End()
		if x.Interrupted() {
			// Stopped by a shutdown, a detach or a cancel while the call was
			// in flight: commit nothing, the call re-runs on resume.
			return
		}
		if need, ok := errors.AsType[*tool.InputNeeded](err); ok {
			send(x.toolInput(call, need))
			return
		}
		if err == nil || llm.Classify(err) != steptype.ErrorTransient || attempt >= pol.MaxAttempts || ctx.Err() != nil {
			if err != nil {
				res = &tool.Result{Content: "error: " + err.Error(), IsError: true}
			}
			tr := new(toolResult)
			s := &tr.s
			x.fillToolResult(s, call, res)
			s.Metrics.StartedAt, s.Metrics.Attempt, s.Fingerprint = start, attempt, fp
			setUsage(&s.Metrics, use)
			if x.replay != nil {
				s.Replay = "live"
			}
			if err != nil {
				s.Error = &StepError{Message: err.Error(), Class: llm.Classify(err), Attempt: attempt, Code: "tool_error"}
			}
			tr.o = outcome{step: s, final: true, completed: &tr.ev}
			send(&tr.o)
			return
		}
		es := &Step{Kind: steptype.KindError, Name: StepTools, Status: steptype.StepFailed, ToolName: call.Name,
			Error: &StepError{Message: err.Error(), Class: steptype.ErrorTransient, Attempt: attempt, Recoverable: true, Code: "tool_error"}}
		es.Metrics.StartedAt, es.Metrics.FinishedAt, es.Metrics.Attempt = start, x.e.now(), attempt
		setUsage(&es.Metrics, use)
		es.Inputs, _ = json.Marshal(map[string]any{"tool_call_id": call.ID})
		send(&outcome{step: es})
		if sleepCtx(ctx, backoffDelay(pol, attempt, llm.RetryAfter(err))) != nil {
			return
		}
	}
}

// callTool calls a tool, turning a panic into an error.
func callTool(ctx context.Context, t tool.Tool, c *tool.Call) (res *tool.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w: tool %q: %v", ErrStepPanic, c.Name, r)
		}
	}()
	res, err = t.Call(ctx, c)
	if err == nil && res == nil {
		res = &tool.Result{}
	}
	return res, err
}

// toolResultStep builds the tool step of a call.
func (x *execution) toolResultStep(call ToolCall, r *tool.Result) *Step {
	s := new(Step)
	x.fillToolResult(s, call, r)
	return s
}

// toolResult is a call's tool step, its outcome and the step's
// step_completed event in one allocation (execCall).
type toolResult struct {
	o  outcome
	s  Step
	ev Event
}

// fillToolResult makes the zero step s the tool step of a call. (Field by
// field: assigning a whole Step to *s copies all of it, write barriers
// included.)
func (x *execution) fillToolResult(s *Step, call ToolCall, r *tool.Result) {
	content := r.Content
	if content == "" && len(r.Output) > 0 {
		content = string(r.Output)
	}
	s.Kind, s.Name, s.Role = steptype.KindTool, StepTools, steptype.RoleTool
	s.Content, s.ToolCallID, s.ToolName = content, call.ID, call.Name
	s.Inputs, s.Outputs, s.StatePatch = call.Arguments, r.Output, r.State
	if r.IsError {
		s.Error = &StepError{Message: content, Class: steptype.ErrorPermanent, Code: "tool_error"}
	}
	if len(r.Metadata) > 0 {
		s.Metadata = r.Metadata
	}
	s.Metrics.StartedAt = x.e.now()
	s.Metrics.FinishedAt = s.Metrics.StartedAt
	attach.Stage(x.e.store, x.e.now, s, r.Attachments)
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
func (r *toolsRound) handle(o *outcome) bool {
	if r.firstErr != nil {
		return false // drain
	}
	x := r.x
	var err error
	switch {
	case o.child != "":
		r.remaining--
		r.parked = true
		r.children = append(r.children, o.child)
	case o.park:
		// Committed at the end with the status change, in one
		// transaction, so an answer can never arrive before the run
		// is waiting.
		r.remaining--
		r.approvals = append(r.approvals, o.step)
		x.waiting[o.step.ToolCallID] = true
	case o.final:
		r.remaining--
		last := r.remaining == 0 && !r.deferCursor && len(r.approvals) == 0 && !x.anyWaiting()
		err = x.commitToolStep(o.step, o.completed, last)
		r.moved = r.moved || last
	default:
		err = x.Commit([]*Step{o.step}, runexec.Update{})
	}
	if err != nil {
		r.firstErr = err
	}
	return r.firstErr == nil
}

// idemSeed is what a tools step's idempotency keys derive from: the run and
// the sequence of the assistant message whose calls it executes.
type idemSeed struct {
	runID string
	seq   int64
	set   bool
}

// key is the idempotency key of call id: the hex of the first 16 bytes of
// sha256("<run id>:<sequence>:<call id>"), or of sha256(":<call id>")
// without an assistant message.
func (b idemSeed) key(callID string) string {
	var kb [128]byte
	k := kb[:0]
	if b.set {
		k = strconv.AppendInt(append(append(k, b.runID...), ':'), b.seq, 10)
	}
	k = append(append(k, ':'), callID...)
	return convo.Hex16(sha256.Sum256(k))
}
