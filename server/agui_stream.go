package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// aguiEvent is one AG-UI event; each type sets only its own fields.
type aguiEvent struct {
	Type            string          `json:"type"`
	Timestamp       int64           `json:"timestamp,omitempty"`
	ThreadID        string          `json:"threadId,omitempty"`
	RunID           string          `json:"runId,omitempty"`
	StepName        string          `json:"stepName,omitempty"`
	MessageID       string          `json:"messageId,omitempty"`
	Role            string          `json:"role,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolCallName    string          `json:"toolCallName,omitempty"`
	ParentMessageID string          `json:"parentMessageId,omitempty"`
	Content         *string         `json:"content,omitempty"`
	Snapshot        json.RawMessage `json:"snapshot,omitempty"`
	Result          *string         `json:"result,omitempty"`
	Outcome         *aguiOutcome    `json:"outcome,omitempty"`
	Message         string          `json:"message,omitempty"`
	Code            string          `json:"code,omitempty"`
	Name            string          `json:"name,omitempty"`
	Value           any             `json:"value,omitempty"`
	Metadata        map[string]any  `json:"metadata,omitempty"`
	// Patch is the delta of a STATE_DELTA (written as "delta").
	Patch []aguiPatchOp `json:"-"`
}

type aguiOutcome struct {
	Type       string          `json:"type"` // success, interrupt, cancelled
	Interrupts []aguiInterrupt `json:"interrupts,omitempty"`
	// PendingToolCallIDs (success) are frontend tool calls to answer.
	PendingToolCallIDs []string `json:"pendingToolCallIds,omitempty"`
}

// aguiInterrupt is one pending input request as an AG-UI interrupt.
type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"` // tool_approval or input_required
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// AG-UI event types.
const (
	aguiRunStarted    = "RUN_STARTED"
	aguiRunFinished   = "RUN_FINISHED"
	aguiRunError      = "RUN_ERROR"
	aguiStepStarted   = "STEP_STARTED"
	aguiStepFinished  = "STEP_FINISHED"
	aguiTextStart     = "TEXT_MESSAGE_START"
	aguiTextContent   = "TEXT_MESSAGE_CONTENT"
	aguiTextEnd       = "TEXT_MESSAGE_END"
	aguiReasonStart   = "REASONING_START"
	aguiReasonMsgOpen = "REASONING_MESSAGE_START"
	aguiReasonContent = "REASONING_MESSAGE_CONTENT"
	aguiReasonMsgEnd  = "REASONING_MESSAGE_END"
	aguiReasonEnd     = "REASONING_END"
	aguiToolStart     = "TOOL_CALL_START"
	aguiToolArgs      = "TOOL_CALL_ARGS"
	aguiToolEnd       = "TOOL_CALL_END"
	aguiToolResult    = "TOOL_CALL_RESULT"
	aguiStateSnapshot = "STATE_SNAPSHOT"
	aguiStateDelta    = "STATE_DELTA"
	aguiCustom        = "CUSTOM"
)

// aguiCheckInterval is how often an AG-UI stream checks the run's status, in
// case it parked while the stream was being set up (its run_waiting event
// then never reaches this subscriber).
const aguiCheckInterval = time.Second

// aguiStream writes one AG-UI response.
type aguiStream struct {
	sw        *sseWriter
	threadID  string
	clientRun string
	run       *stepwise.Run
	t         *aguiTranslator
	err       error
	lastWrite time.Time
}

func (s *Server) newAGUIStream(w http.ResponseWriter, in *aguiInput, run *stepwise.Run) *aguiStream {
	o := &aguiStream{sw: newSSEWriter(w, s.cfg.WriteTimeout), threadID: in.ThreadID, clientRun: in.RunID, run: run}
	o.t = &aguiTranslator{emit: o.emit, state: run.State}
	return o
}

func (o *aguiStream) emit(ev *aguiEvent) {
	if o.err != nil {
		return
	}
	ev.Timestamp = time.Now().UnixMilli()
	var data []byte
	var err error
	if ev.Type == aguiStateDelta {
		// Its delta is a JSON Patch, not the text of the other deltas.
		data, err = json.Marshal(struct {
			*aguiEvent
			Delta []aguiPatchOp `json:"delta"`
		}{ev, ev.Patch})
	} else {
		data, err = json.Marshal(ev)
	}
	if err != nil {
		o.err = err
		return
	}
	o.err = o.sw.event("", "", data)
	o.lastWrite = time.Now()
}

func (o *aguiStream) flush() {
	if o.err == nil {
		o.err = o.sw.flush()
	}
}

// start sends RUN_STARTED and the run's state.
func (o *aguiStream) start() error {
	if err := o.sw.start(); err != nil {
		return err
	}
	o.emit(&aguiEvent{Type: aguiRunStarted, ThreadID: o.threadID, RunID: o.clientRun,
		Metadata: map[string]any{"stepwise": map[string]any{"run_id": o.run.ID, "session_id": o.run.SessionID}}})
	o.emit(&aguiEvent{Type: aguiStateSnapshot, Snapshot: o.t.snapshot()})
	o.flush()
	return o.err
}

// runError ends the response with RUN_ERROR carrying err's problem.
func (o *aguiStream) runError(err error) {
	p, _ := problemOf(err)
	o.t.closeStep()
	o.emit(&aguiEvent{Type: aguiRunError, Message: p.Detail, Code: p.Code})
	o.flush()
}

// finish ends the response after the run finished.
func (o *aguiStream) finish(r *stepwise.Run) {
	o.t.closeStep()
	switch r.Status {
	case steptype.RunCompleted:
		out := r.Output
		o.emit(&aguiEvent{Type: aguiRunFinished, ThreadID: o.threadID, RunID: o.clientRun, Result: &out, Outcome: &aguiOutcome{Type: "success"}})
	case steptype.RunCancelled:
		o.emit(&aguiEvent{Type: aguiRunFinished, ThreadID: o.threadID, RunID: o.clientRun, Outcome: &aguiOutcome{Type: "cancelled"}})
	default:
		msg, code := "run "+string(r.Status), "run_failed"
		if r.Error != nil {
			msg = r.Error.Message
			if r.Error.Code != "" {
				code = r.Error.Code
			}
		}
		o.emit(&aguiEvent{Type: aguiRunError, Message: msg, Code: code})
	}
	o.flush()
}

// interrupt ends the response with RUN_FINISHED whose outcome lists the
// thread's pending requests; when only frontend tool calls are pending, the
// outcome is success with their ids (AG-UI's frontend-tool contract).
func (o *aguiStream) interrupt(ctx context.Context, s *Server) {
	o.t.closeStep()
	pending, err := s.sessionPending(ctx, o.run.SessionID)
	if err != nil {
		o.runError(err)
		return
	}
	calls, others := splitPending(pending)
	if len(others) == 0 && len(calls) > 0 {
		o.emit(&aguiEvent{Type: aguiRunFinished, ThreadID: o.threadID, RunID: o.clientRun, Outcome: &aguiOutcome{Type: "success", PendingToolCallIDs: calls}})
		o.flush()
		return
	}
	var list []aguiInterrupt
	for _, p := range others {
		list = append(list, interruptOf(p))
	}
	if len(list) == 0 {
		o.runError(errorf(http.StatusConflict, CodeNotWaiting, "run %s is waiting but has no pending request", o.run.ID))
		return
	}
	o.emit(&aguiEvent{Type: aguiRunFinished, ThreadID: o.threadID, RunID: o.clientRun, Outcome: &aguiOutcome{Type: "interrupt", Interrupts: list}})
	o.flush()
}

func interruptOf(p *stepwise.PendingInput) aguiInterrupt {
	req := p.Request
	in := aguiInterrupt{ID: p.RequestID, Reason: "input_required", Message: req.Prompt,
		Metadata: map[string]any{"stepwise": map[string]any{"run_id": p.RunID, "session_id": p.SessionID, "sequence": p.Step.Sequence}}}
	if len(req.Context) > 0 {
		in.Metadata["context"] = req.Context
	}
	if req.Approval != nil {
		in.Reason, in.ToolCallID = "tool_approval", req.Approval.ID
		in.Metadata["tool"] = map[string]any{"name": req.Approval.Name, "arguments": req.Approval.Arguments}
	} else if p.Step.ToolCallID != "" {
		in.ToolCallID = p.Step.ToolCallID
	}
	if req.Breakpoint != nil {
		// A breakpoint's pause: answered with "continue", "step" or
		// {"action", "state"} (docs/breakpoints.md).
		in.Metadata["breakpoint"] = req.Breakpoint
	}
	switch {
	case len(req.Schema) > 0 && req.Schema[0] == '{':
		in.ResponseSchema = req.Schema
	case req.Approval == nil:
		in.ResponseSchema = json.RawMessage(`{"type":"string"}`)
	}
	if !req.ExpiresAt.IsZero() {
		in.ExpiresAt = req.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return in
}

// aguiFollow streams a run's events as AG-UI events until it parks,
// finishes or the client leaves. after is the session position before the
// run started or resumed. The handler's goroutine ranges over the run's
// subscription (resuming after (after.Seq, 1), see followRun) and writes
// each event as it comes, flushing once per batch (SubscribeParams.Flush,
// and every maxBatch events); a watcher on a timer checks the store for a
// run that settled without this stream seeing it and sends heartbeats
// (aguiWatch).
func (s *Server) aguiFollow(ctx context.Context, out *aguiStream, run *stepwise.Run, after stepwise.Position, resumed bool) {
	t := out.t
	out.flush()
	if out.err != nil {
		return
	}
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	w := startAGUIWatch(s, sub, cancel, out, run.ID, after)
	n := 0 // events written since the last flush
	p := stepwise.SubscribeParams{RunID: run.ID, After: followFrom(after), Flush: func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		n = 0
		out.flush()
		return out.err
	}}
	for ev, err := range s.eng.Subscribe(sub, p) {
		w.mu.Lock()
		done := false
		switch {
		case err != nil:
			if sub.Err() == nil { // not stopped by the watcher or the client
				out.runError(err)
				done = true
			}
		case ev.RunID == run.ID:
			switch ev.Type {
			case stepwise.EventRunWaiting:
				// A resumed run parks again only after a new step
				// (its new request); an older run_waiting is stale.
				if !resumed || t.lastSeq > after.Seq {
					w.mu.Unlock()
					w.stop()
					out.interrupt(ctx, s)
					return
				}
			case stepwise.EventRunFinished:
				if ev.Run != nil {
					out.finish(ev.Run)
					done = true
				}
			case stepwise.EventStepStarted:
				t.stepStarted(ev.StepName)
			case stepwise.EventStepDelta:
				t.delta(ev.Delta)
			case stepwise.EventStepReset:
				t.reset(ev.StepName, ev.Reset)
			case stepwise.EventStepProgress, stepwise.EventStepYield:
				t.custom(ev)
			case stepwise.EventStepCompleted:
				if ev.Step != nil && ev.Step.Sequence > after.Seq && ev.Step.Sequence > t.lastSeq {
					t.step(ev.Step)
				}
			}
		}
		if n++; !done && out.err == nil && n >= maxBatch {
			n = 0
			out.flush()
		}
		done = done || out.err != nil
		w.mu.Unlock()
		if done {
			w.stop()
			return
		}
	}
	w.stop() // from here on the writer is this goroutine's alone
	switch {
	case out.err != nil:
	case w.settled != nil:
		s.aguiCatchUp(ctx, out, run, after)
		if w.settled.Status == steptype.RunWaiting {
			out.interrupt(ctx, s)
		} else {
			out.finish(w.settled)
		}
	case w.err != nil:
		out.runError(w.err)
	case ctx.Err() == nil:
		out.runError(errors.New("stepwise: run stream ended unexpectedly"))
	}
}

// aguiWatch checks, every aguiCheckInterval, whether the run settled (a
// subscription opened while the engine's in-memory ring was gone may miss
// lifecycle events; the store has the truth) and, when the stream has been
// quiet for the heartbeat interval, writes a heartbeat. Twice settled in a
// row, or a store or write error, stops the subscription (cancel); the
// handler then finishes the stream. Writes take mu, which the handler holds
// while it writes.
type aguiWatch struct {
	s       *Server
	ctx     context.Context
	cancel  context.CancelFunc
	out     *aguiStream
	runID   string
	after   stepwise.Position
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	running sync.WaitGroup
	ticks   int           // consecutive checks that found the run settled
	settled *stepwise.Run // set before cancel: the run settled
	err     error         // set before cancel: the check failed
}

func startAGUIWatch(s *Server, ctx context.Context, cancel context.CancelFunc, out *aguiStream, runID string, after stepwise.Position) *aguiWatch {
	w := &aguiWatch{s: s, ctx: ctx, cancel: cancel, out: out, runID: runID, after: after}
	w.t = time.AfterFunc(aguiCheckInterval, w.check)
	return w
}

func (w *aguiWatch) check() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.running.Add(1)
	w.mu.Unlock()
	defer w.running.Done()
	settled, err := w.s.runSettled(w.ctx, w.runID, w.after)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.ctx.Err() != nil {
		return
	}
	switch {
	case err != nil:
		w.err = err
		w.cancel()
		return
	case settled == nil:
		w.ticks = 0
	default:
		if w.ticks++; w.ticks >= 2 {
			w.settled = settled
			w.cancel()
			return
		}
	}
	if o := w.out; o.err == nil && time.Since(o.lastWrite) >= w.s.cfg.Heartbeat {
		if o.err = o.sw.comment("heartbeat"); o.err == nil {
			o.err = o.sw.flush()
		}
		if o.err != nil {
			w.cancel()
			return
		}
		o.lastWrite = time.Now()
	}
	w.t.Reset(aguiCheckInterval)
}

// stop ends the checks; once it returns none runs or writes any more.
func (w *aguiWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.t.Stop()
	w.running.Wait()
}

// runSettled returns the run when it has finished, or parked on a request
// made after position after; nil while it is still going.
func (s *Server) runSettled(ctx context.Context, runID string, after stepwise.Position) (*stepwise.Run, error) {
	r, err := s.eng.Store().RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, err
	}
	if r.Status.Terminal() {
		return r, nil
	}
	if r.Status != steptype.RunWaiting {
		return nil, nil
	}
	pending, err := s.sessionPending(ctx, r.SessionID)
	if err != nil {
		return nil, err
	}
	for _, p := range pending {
		if p.Step.Sequence > after.Seq {
			return r, nil
		}
	}
	return nil, nil
}

// aguiCatchUp translates the run's committed steps the stream has not seen.
func (s *Server) aguiCatchUp(ctx context.Context, out *aguiStream, run *stepwise.Run, after stepwise.Position) {
	from := max(after.Seq, out.t.lastSeq) + 1
	steps, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: run.SessionID, StartSeq: from})
	if err != nil {
		return
	}
	for _, st := range steps {
		if st.RunID == run.ID {
			out.t.step(st)
		}
	}
}

// sortedPending orders pending requests by sequence.
func sortedPending(m map[string]*stepwise.PendingInput) []*stepwise.PendingInput {
	out := make([]*stepwise.PendingInput, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *stepwise.PendingInput) int {
		return cmp.Or(cmp.Compare(a.Step.Sequence, b.Step.Sequence), strings.Compare(a.RequestID, b.RequestID))
	})
	return out
}
