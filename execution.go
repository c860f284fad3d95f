package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Causes of an execution's cancellation that stop it without failing the
// run: the call in flight commits nothing, and the run is handed back to the
// queue to be resumed from its cursor (here, on another instance, or by the
// next `stepwise resume`). Only a per-step timeout or a genuine error of the
// call is ever recorded as a step.
var (
	// errDetached: the consumer of an inline execution stopped iterating.
	errDetached = errors.New("stepwise: execution detached by its consumer")
	// errShutdown: Engine.Stop (a graceful shutdown of the process).
	errShutdown = errors.New("stepwise: engine stopping")
	// errConsumerGone: the context of an inline execution was cancelled
	// (Ctrl-C or SIGTERM of the CLI, a caller giving up); it wraps the
	// context's cause.
	errConsumerGone = errors.New("stepwise: execution context cancelled")
)

// goneError is errConsumerGone with the cause of the consumer's context.
type goneError struct{ cause error }

func (g *goneError) Error() string { return errConsumerGone.Error() + ": " + g.cause.Error() }

func (g *goneError) Is(target error) bool { return target == errConsumerGone }

func (g *goneError) Unwrap() error { return g.cause }

// handedBack reports whether err stops an execution without failing its run.
func handedBack(err error) bool {
	return errors.Is(err, errDetached) || errors.Is(err, errShutdown) || errors.Is(err, errConsumerGone)
}

// interrupted reports whether the execution itself was stopped (shutdown,
// detach, cancel, lease lost): whatever is in flight then commits nothing.
// A per-step timeout cancels only the step's context, not this one.
func (x *execution) interrupted() bool { return context.Cause(x.ctx) != nil }

// execution is one process executing one run between a claim and a park or
// finish. It is the only writer of the run while it holds the lease.
type execution struct {
	e      *Engine
	agent  *Agent
	run    *Run          // current row; updated in memory after each commit
	topic  *broker.Topic // the session's broker topic, from acquire to release
	conv   *convo.Conversation
	ctx    context.Context
	cancel context.CancelCauseFunc
	// unwatch stops relaying the consumer's cancellation (inline runs).
	unwatch func() bool
	sink    *broker.Sink // inline consumer, nil for background runs
	// held is a step_completed event not sent to sink yet (publishHeld);
	// sinkMu orders the sends to sink (a handler's goroutines may publish).
	sinkMu sync.Mutex
	held   *Event
	parent *execution

	prevStepID  string
	lastSeq     int64
	lastAnswer  *Step
	replay      *replaySource
	approvals   map[string]ApprovalAnswer    // tool-call id → decision
	waiting     map[string]bool              // tool-call id → a request is pending
	toolAnswers map[string][]json.RawMessage // tool-call id → answers to the input the call asked for (tool.InputNeeded)
	allowed     map[string]bool              // tools allowed for the session
	clientTools []llm.ToolDef                // tools the run's caller executes
	bp          *breakState                  // the run's breakpoints, nil without any
	// customOut is the content of the run's last custom step when no
	// assistant message came after it (see outputWith).
	customOut string

	done chan struct{}       // closed by release
	fp   convo.Fingerprinter // request fingerprints' reused state
	defs []llm.ToolDef       // the agent's tool definitions, built once

	progress *Progress    // the run's last progress report (Scope.Progress)
	deltas   atomic.Int64 // deltas streamed, to detect a failed attempt's partial output

	mu sync.Mutex // guards run fields read by the heartbeat, and progress

	before int64 // load only steps before this sequence (a preview); 0: all

	// sessLock is the session's commit lock (referenced while loop runs).
	sessLock *broker.SessionLock
	// buf is what the execution keeps from one step to the next so that a
	// step allocates less.
	buf stepBuffers
}

// stepBuffers is the part of an execution that its steps reuse: store
// parameters, the built-in handlers, the scope and record of a lean step,
// and values a step would otherwise allocate each time (see
// docs/PERFORMANCE.md, "The durable step against its floor").
type stepBuffers struct {
	// storeCtx is the context of store writes, appendRuns StepAppend's
	// Runs, llmH and toolsH the built-in handlers.
	storeCtx     context.Context
	appendRuns   [1]*store.RunUpdateParams
	llmH, toolsH Handler
	calls        []ToolCall // toolsStep's calls
	boxes        [2]struct {
		v   string
		box any
	} // see boxed
	// commit's store parameters, reused: a store does not keep them.
	runParams    store.RunUpdateParams
	appendParams store.StepAppendParams
	one          [1]*Step // see one
	leanStep     Step     // see runStep
	leanScope    Scope
	builtNext    Next // see builtinNext
	priced       struct {
		model string
		price Price
		ok    bool
		set   bool
	} // see price
}

// expectRunning fences the writes of an execution (read only).
var expectRunning = []steptype.RunStatus{steptype.RunRunning}

// cursorLLM is the cursor of the built-in llm step (read only).
var cursorLLM = StepLLM

// one returns a slice holding just s, in a buffer of the execution that
// the next call reuses (commit keeps none of its steps slice).
func (x *execution) one(s *Step) []*Step {
	x.buf.one[0] = s
	return x.buf.one[:]
}

// boxed returns v as an interface value, the one of the previous call
// with the same slot when v is unchanged: a string in an interface is
// immutable, so steps can share it, and a model that answers with the same
// model name and finish reason every time costs no allocation for them.
func (x *execution) boxed(slot int, v string) any {
	b := &x.buf.boxes[slot]
	if b.v != v || b.box == nil {
		b.v, b.box = v, v
	}
	return b.box
}

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
	sess, err := x.e.store.SessionGet(ctx, &store.SessionGetParams{ID: x.run.SessionID})
	if err != nil {
		return fmt.Errorf("load session: %w", err)
	}
	x.lastSeq = sess.LastSequence
	// The run's own steps: its approvals, pending requests, progress, last
	// answer and previous step (bounded by the run, not the session).
	var own []*Step
	if x.run.ID != "" && sess.LastSequence > 0 { // a session without steps has none of the run
		if own, err = x.e.store.StepList(ctx, &store.StepListParams{RunID: x.run.ID}); err != nil {
			return fmt.Errorf("load context: %w", err)
		}
	}
	x.approvals, x.waiting, x.toolAnswers = map[string]ApprovalAnswer{}, map[string]bool{}, nil
	for _, s := range own {
		x.noteRunInput(s)
		if x.run.Hop == 0 && s.Hop != 0 || x.before > 0 && s.Sequence >= x.before {
			continue
		}
		x.prevStepID = s.ID
		if s.Progress != nil {
			x.progress = s.Progress
		}
		if s.Kind == steptype.KindInput && s.Status == steptype.StepCompleted && !isBreakStep(s) {
			x.lastAnswer = s
		}
		if s.Hop == x.run.Hop {
			x.noteOutput(s)
		}
	}
	if x.run.Hop > 0 {
		x.conv, x.allowed = convo.New(), map[string]bool{}
		for _, s := range own {
			if name, ok := allowedBy(s); ok {
				x.allowed[name] = true
			}
			if x.before > 0 && s.Sequence >= x.before {
				continue
			}
			x.conv.Add(s)
			if s.Kind == steptype.KindSystem && s.Name == "context" {
				x.conv.RestoreTrim(s)
			}
		}
	} else if err := x.loadThread(ctx, sess); err != nil {
		return fmt.Errorf("load context: %w", err)
	}
	if x.prevStepID == "" && x.run.ParentStepID != "" {
		x.prevStepID = x.run.ParentStepID
	}
	if err := x.loadReplay(ctx); err != nil {
		return err
	}
	x.loadBreaks(own)
	return nil
}

func (x *execution) runSnapshot() *Run {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := *x.run
	return &r
}

// conflict explains a failed fenced write: the run was cancelled, finished
// elsewhere, or its lease was taken.
func (x *execution) conflict(err error) error {
	r, gerr := x.e.store.RunGet(context.WithoutCancel(x.ctx), &store.RunGetParams{ID: x.run.ID})
	if gerr != nil {
		return fmt.Errorf("commit step: %w", err)
	}
	switch {
	case r.Status == steptype.RunCancelled:
		return ErrRunCancelled
	case r.Status.Terminal():
		return ErrRunFinished
	case r.LeaseOwner != x.e.cfg.Owner:
		return ErrLeaseLost
	}
	return fmt.Errorf("commit step: %w", err)
}

// stopped handles an execution that cannot continue: a detached consumer,
// a shutdown or a cancelled consumer context hands the run back to the queue
// (nothing of the step in flight was committed); a cancelled run just stops;
// other errors are returned.
func (x *execution) stopped(err error) error {
	switch {
	case handedBack(err):
		x.handBack()
		var g *goneError
		if errors.As(err, &g) {
			return g.cause // the caller cancelled its context: say so
		}
		return nil
	case errors.Is(err, ErrRunCancelled):
		return nil
	}
	return err
}

// handBack returns the run to the queue and releases its lease, so that the
// next claim (here, elsewhere, or `stepwise resume`) continues it at once.
func (x *execution) handBack() {
	queued := steptype.RunQueued
	_, err := x.e.store.RunUpdate(context.WithoutCancel(x.ctx), &store.RunUpdateParams{
		ID: x.run.ID, Owner: x.e.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning},
		Status: &queued, ClearLease: true, Now: x.e.now(),
	})
	if err == nil {
		x.mu.Lock()
		x.run.Status = queued
		x.mu.Unlock()
	}
}
