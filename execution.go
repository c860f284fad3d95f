package stepwise

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/internal/runexec"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// execution is one process executing one run between a claim and a park or
// finish: the run's Core (its row, commits and events, package runexec)
// and what a user names, the agent and the handlers of its steps.
type execution struct {
	runexec.Core
	e      *Engine
	agent  *Agent
	parent *execution

	lastAnswer  *Step
	replay      *runexec.Replay
	approvals   map[string]ApprovalAnswer    // tool-call id → decision
	waiting     map[string]bool              // tool-call id → a request is pending
	toolAnswers map[string][]json.RawMessage // tool-call id → answers to the input the call asked for (tool.InputNeeded)
	allowed     map[string]bool              // tools allowed for the session
	clientTools []llm.ToolDef                // tools the run's caller executes
	bp          *breakState                  // the run's breakpoints, nil without any

	done chan struct{}       // closed by release
	fp   convo.Fingerprinter // request fingerprints' reused state
	defs []llm.ToolDef       // the agent's tool definitions, built once

	before int64 // load only steps before this sequence (a preview); 0: all

	// buf is what the execution keeps from one step to the next so that a
	// step allocates less.
	buf stepBuffers
}

// newExec returns the execution of run by agent a, its Core ready for its
// contexts and topic.
func (e *Engine) newExec(a *Agent, run *Run) *execution {
	x := &execution{e: e, agent: a}
	x.Env, x.Unit, x.Run = e.runEnv, x, run
	return x
}

// stepBuffers is the part of an execution that its steps reuse: the
// built-in handlers, the scope and record of a lean step, and values a
// step would otherwise allocate each time (see docs/PERFORMANCE.md, "The
// durable step against its floor").
type stepBuffers struct {
	llmH, toolsH Handler    // the built-in handlers
	calls        []ToolCall // toolsStep's calls
	leanStep     Step       // see runStep
	leanScope    Scope
	builtNext    Next // see builtinNext
}

// cursorLLM is the cursor of the built-in llm step (read only).
var cursorLLM = StepLLM

// builtinNext returns n from a built-in step handler: in a buffer of the
// execution, which the next step reuses, when no hook can see (and keep)
// it — the loop and record read a Next only until the step is recorded —
// or else as a new one.
func (x *execution) builtinNext(name string, n Next) *Next {
	if x.hooks(name) {
		c := new(Next) // not &n: n would move to the heap on every call
		*c = n
		return c
	}
	x.buf.builtNext = n
	return &x.buf.builtNext
}

// load builds the in-memory context of the run from the store, once. A
// child run's context is its own steps; a top-level run's is the session's
// hop-0 thread, restored from a context checkpoint (see loadThread).
func (x *execution) load(ctx context.Context) error {
	sess, err := x.e.store.SessionGet(ctx, &store.SessionGetParams{ID: x.Run.SessionID})
	if err != nil {
		return fmt.Errorf("load session: %w", err)
	}
	x.LastSeq = sess.LastSequence
	// The run's own steps: its approvals, pending requests, progress, last
	// answer and previous step (bounded by the run, not the session).
	var own []*Step
	if x.Run.ID != "" && sess.LastSequence > 0 { // a session without steps has none of the run
		if own, err = x.e.store.StepList(ctx, &store.StepListParams{RunID: x.Run.ID}); err != nil {
			return fmt.Errorf("load context: %w", err)
		}
	}
	x.approvals, x.waiting, x.toolAnswers = map[string]ApprovalAnswer{}, map[string]bool{}, nil
	for _, s := range own {
		x.noteRunInput(s)
		if x.Run.Hop == 0 && s.Hop != 0 || x.before > 0 && s.Sequence >= x.before {
			continue
		}
		x.PrevStepID = s.ID
		if s.Progress != nil {
			x.Progress = s.Progress
		}
		if s.Kind == steptype.KindInput && s.Status == steptype.StepCompleted && !isBreakStep(s) {
			x.lastAnswer = s
		}
		if s.Hop == x.Run.Hop {
			x.NoteOutput(s)
		}
	}
	if x.Run.Hop > 0 {
		x.Conv, x.allowed = convo.New(), map[string]bool{}
		for _, s := range own {
			if name, ok := allowedBy(s); ok {
				x.allowed[name] = true
			}
			if x.before > 0 && s.Sequence >= x.before {
				continue
			}
			x.Conv.Add(s)
			if s.Kind == steptype.KindSystem && s.Name == "context" {
				x.Conv.RestoreTrim(s)
			}
		}
	} else if err := x.loadThread(ctx, sess); err != nil {
		return fmt.Errorf("load context: %w", err)
	}
	if x.PrevStepID == "" && x.Run.ParentStepID != "" {
		x.PrevStepID = x.Run.ParentStepID
	}
	if err := x.loadReplay(ctx); err != nil {
		return err
	}
	x.loadBreaks(own)
	return nil
}
