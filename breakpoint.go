package stepwise

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/stepwise-run/stepwise/internal/answer"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// Breakpoints pause a run before or after the steps they select (a step
// name, a kind, a tool name or "*"; see wire.Breakpoints). A pause is a
// waiting input step, named "breakpoint", whose request carries a
// BreakpointPause: it is listed and answered as every pending request is
// (Engine.Pending, Engine.Answer), survives a restart, and is answered with
// a BreakpointAnswer: continue, step once, or edit the state and continue.
type Breakpoints = wire.Breakpoints

// BreakpointPause says where a run paused (InputRequest.Breakpoint).
type BreakpointPause = wire.BreakpointPause

// BreakpointAnswer answers a breakpoint's pause.
type BreakpointAnswer = wire.BreakpointAnswer

// StepBreakpoint is the name of the input step of a breakpoint's pause,
// and of the system step that records a state edited at one.
const StepBreakpoint = "breakpoint"

// The actions of a BreakpointAnswer.
const (
	BreakContinue = answer.Continue
	BreakStep     = answer.Step
)

// breakState is what an execution knows of its run's breakpoints: the
// selectors in force (the agent's and the run's), and what the last
// answered pause said.
type breakState struct {
	before, after []string
	// passedAt is the run's step count at the last answered pause (after
	// the edit it asked for): no pause is taken again until a step commits.
	passedAt int64
	stepping bool            // the answer asked to step once
	edit     json.RawMessage // a state edit the answer asked for, not committed yet
}

// applyPatch returns the state after u's patch, and the effective patch: a
// breakpoint's edit is merged as is, other updates through the reducers.
func (x *execution) ApplyPatch(state, patch json.RawMessage, edit bool) (json.RawMessage, json.RawMessage, error) {
	if edit {
		next, err := MergePatch(state, patch)
		return next, patch, err
	}
	return x.agent.applyState(state, patch)
}

// loadBreaks sets up the run's breakpoints (the agent's and the run's
// options') from the run's own steps: the last answered pause says
// whether to step once and whether a state edit is still to commit.
func (x *execution) loadBreaks(own []*Step) {
	var runBreaks *Breakpoints
	if bytes.Contains(x.Run.Options, []byte(`"breakpoints"`)) {
		var o runOptions
		_ = json.Unmarshal(x.Run.Options, &o)
		runBreaks = o.Breakpoints
	}
	ab := x.agent.Breakpoints
	if ab == nil && runBreaks == nil {
		return
	}
	b := &breakState{passedAt: -1}
	for _, src := range []*Breakpoints{ab, runBreaks} {
		if src != nil {
			b.before = append(b.before, src.Before...)
			b.after = append(b.after, src.After...)
		}
	}
	x.bp = b
	for i := len(own) - 1; i >= 0; i-- {
		s := own[i]
		if s.RunID != x.Run.ID || s.Name != StepBreakpoint || s.Kind != steptype.KindInput || s.Status != steptype.StepCompleted {
			continue
		}
		var req InputRequest
		if json.Unmarshal(s.Inputs, &req) != nil || req.Breakpoint == nil {
			continue
		}
		a := answer.ParseBreak(s.Outputs)
		b.passedAt, b.stepping = req.Breakpoint.At, a.Action == BreakStep
		edited := false
		for _, later := range own[i+1:] {
			if later.RunID == x.Run.ID && later.Kind == steptype.KindSystem && later.Name == StepBreakpoint {
				edited = true
			}
		}
		switch {
		case edited:
			b.passedAt++
		case len(a.State) > 0 && x.Run.StepCount == b.passedAt:
			b.edit = a.State
		}
		return
	}
}

// stepKind is the kind of the step name before it runs.
func (x *execution) stepKind(name string) steptype.Kind {
	if _, custom := x.agent.Steps[name]; custom {
		return steptype.KindCustom
	}
	switch name {
	case StepLLM:
		return steptype.KindLLM
	case StepTools:
		return steptype.KindTool
	}
	return steptype.KindCustom
}

// toolNames are the names of the tool calls of the last assistant message.
func (x *execution) toolNames() []string {
	la := x.Conv.LastAssistant()
	if la == nil {
		return nil
	}
	names := make([]string, 0, len(la.ToolCalls))
	for _, c := range la.ToolCalls {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

// toolsStarted reports whether the built-in tools step at the cursor
// already began its calls (a resume after an approval, an answer or a
// crash): it is not paused before again.
func (x *execution) toolsStarted() bool {
	la := x.Conv.LastAssistant()
	pending := x.Conv.PendingToolCalls(nil)
	if la == nil || len(pending) == 0 || len(pending) < len(la.ToolCalls) {
		return true
	}
	for _, c := range pending {
		if _, ok := x.approvals[c.ID]; ok || x.waiting[c.ID] || x.toolAnswers[c.ID] != nil {
			return true
		}
	}
	return false
}

// applyBreakEdit commits the state edit the last answered pause asked for,
// as a system step, before the run goes on.
func (x *execution) applyBreakEdit() error {
	b := x.bp
	if b == nil || b.edit == nil {
		return nil
	}
	s := &Step{Kind: steptype.KindSystem, Name: StepBreakpoint, Content: "state edited at a breakpoint"}
	if err := x.Commit([]*Step{s}, runexec.Update{Patch: b.edit, PatchStep: s, Edit: true}); err != nil {
		return err
	}
	b.edit, b.passedAt = nil, x.Run.StepCount
	return nil
}

// pauseBefore pauses the run before the step at cursor when a breakpoint
// selects it, or when the last answer asked to step once.
func (x *execution) pauseBefore(cursor string) (bool, error) {
	b := x.bp
	if b == nil || x.Run.StepCount == b.passedAt {
		return false, nil
	}
	kind := x.stepKind(cursor)
	var tools []string
	builtinTools := cursor == StepTools && x.agent.Steps[StepTools] == nil
	if builtinTools {
		if x.toolsStarted() {
			return false, nil
		}
		tools = x.toolNames()
	}
	matched := answer.Match(b.before, cursor, kind, tools)
	if matched == "" && b.stepping {
		matched = BreakStep
	}
	if matched == "" {
		return false, nil
	}
	return true, x.pause("before", cursor, kind, tools, matched)
}

// breakAfter returns the selector that pauses the run after the step name
// of kind, or "".
func (x *execution) breakAfter(name string, kind steptype.Kind) string {
	b := x.bp
	if b == nil || len(b.after) == 0 {
		return ""
	}
	var tools []string
	if name == StepTools && x.agent.Steps[StepTools] == nil {
		tools = x.toolNames()
	}
	return answer.Match(b.after, name, kind, tools)
}

// pauseAfter pauses the run after the step name of kind committed, when a
// breakpoint selects it.
func (x *execution) pauseAfter(name string, kind steptype.Kind) (bool, error) {
	matched := x.breakAfter(name, kind)
	if matched == "" || x.Run.Status == steptype.RunWaiting {
		return false, nil
	}
	var tools []string
	if name == StepTools && x.agent.Steps[StepTools] == nil {
		tools = x.toolNames()
	}
	return true, x.pause("after", name, kind, tools, matched)
}

// pause commits a breakpoint's pause: a waiting input step, the run
// waiting with it.
func (x *execution) pause(when, name string, kind steptype.Kind, tools []string, matched string) error {
	x.Flush()
	x.Mu.Lock()
	state := x.Run.State
	x.Mu.Unlock()
	bp := &BreakpointPause{When: when, Step: name, Kind: kind, Tools: tools, Matched: matched, State: state, At: x.Run.StepCount + 1}
	prompt := fmt.Sprintf("Paused %s step %s (breakpoint %s): continue, step, or edit the state.", when, name, matched)
	if matched == BreakStep {
		prompt = fmt.Sprintf("Paused %s step %s (stepping): continue, step, or edit the state.", when, name)
	}
	s, err := x.inputStep(StepBreakpoint, &InputRequest{Prompt: prompt, Schema: answer.BreakSchema, Breakpoint: bp}, nil)
	if err != nil {
		return err
	}
	waiting := steptype.RunWaiting
	if err := x.Commit([]*Step{s}, runexec.Update{Status: &waiting}); err != nil {
		return err
	}
	x.Publish(&Event{Type: EventRunWaiting, Run: x.RunSnapshot()})
	return nil
}

// isBreakStep reports whether s is a breakpoint's pause.
func isBreakStep(s *Step) bool {
	return s.Kind == steptype.KindInput && s.Name == StepBreakpoint && bytes.Contains(s.Inputs, []byte(`"breakpoint"`))
}
