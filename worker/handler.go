package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/wire"
)

// outcome is what finished a task, stored as its result: the worker whose
// token finished it and one of its completion, failure or input request.
type outcome struct {
	Worker   string                 `json:"worker"`
	Complete *wire.TaskComplete     `json:"complete,omitempty"`
	Fail     *wire.TaskFail         `json:"fail,omitempty"`
	Input    *wire.TaskInputRequest `json:"input,omitempty"`
}

// Step metadata keys of a step or tool call a worker served.
const (
	MetaWorker = "worker" // the worker id whose result committed
	MetaTask   = "task"   // the task id
)

// stepHandler serves a custom step by a task.
type stepHandler struct {
	svc   *Service
	agent string
	step  *wire.WorkerStep
}

// StepKey is the idempotency key of a worker step: the run, the step name
// and the run's step count when it started (a transient failure commits an
// error step, so a retry has a key of its own; a re-execution after a crash
// has the same).
func StepKey(runID, step string, stepCount int64) string {
	return "step/" + runID + "/" + step + "/" + strconv.FormatInt(stepCount, 10)
}

// HandleStep implements stepwise.Handler.
func (h *stepHandler) HandleStep(ctx context.Context, sc *stepwise.Scope) (*stepwise.Next, error) {
	run := sc.Run()
	in := wire.TaskInput{State: sc.State(), RunInput: run.Input}
	if h.step.Messages {
		in.Messages = sc.Messages()
	}
	if ans := h.freshAnswer(ctx, sc); ans != nil {
		var req wire.InputRequest
		_ = json.Unmarshal(ans.Inputs, &req)
		in.Answer, in.Request, in.RequestID = ans.Outputs, &req, ans.ID
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("task input: %w", err)
	}
	t, err := h.svc.serve(ctx, &store.Task{ID: stepwise.NewID(), Key: StepKey(run.ID, sc.StepName(), run.StepCount), Kind: wire.TaskKindStep,
		Name: sc.StepName(), Agent: h.agent, AgentVersion: sc.Agent().Version, SessionID: run.SessionID, RunID: run.ID, StepID: sc.StepID(),
		Attempt: sc.Attempt(), Input: input}, func(evs []*wire.TaskEvent) { relayStep(ctx, sc, evs) })
	if t != nil {
		sc.SetMetadata(MetaTask, t.ID)
	}
	if err != nil {
		return nil, err
	}
	o, err := decodeOutcome(t)
	if err != nil {
		return nil, err
	}
	sc.SetMetadata(MetaWorker, o.Worker)
	switch {
	case o.Complete != nil:
		return stepNext(sc, o.Complete), nil
	case o.Input != nil:
		return &stepwise.Next{Step: sc.StepName(), Input: o.Input.Request, State: stateOf(o.Input.State), Content: o.Input.Content}, nil
	default:
		return nil, failure(o.Fail)
	}
}

// freshAnswer returns the answered input step that this step asked for
// just before this execution (the run's latest step), or nil.
func (h *stepHandler) freshAnswer(ctx context.Context, sc *stepwise.Scope) *stepwise.Step {
	ans := sc.LastAnswer()
	if ans == nil || ans.Name != sc.StepName() || ans.Kind != steptype.KindInput {
		return nil
	}
	last, err := h.svc.store.StepLast(ctx, &store.StepLastParams{SessionID: sc.SessionID()})
	if err != nil || last.ID != ans.ID {
		return nil
	}
	return ans
}

func stateOf(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// stepNext turns a completion into the step's Next, its usage, cost and
// annotations reported through the scope.
func stepNext(sc *stepwise.Scope, c *wire.TaskComplete) *stepwise.Next {
	for _, u := range c.Usage {
		sc.ReportUsage(u.Model, u.Usage)
	}
	sc.ReportCost(c.CostUSD)
	n := &stepwise.Next{Step: c.Next, State: stateOf(c.State), Content: c.Content}
	if len(c.Output) > 0 {
		n.Output = c.Output
	}
	if c.Annotations != nil {
		n.Annotations = *c.Annotations
	}
	if d := c.Decision; d != nil {
		n.Decision = &stepwise.Decision{Purpose: d.Purpose, Options: d.Options, Choice: d.Choice}
	}
	return n
}

// relayStep applies a worker's live reports to the step's scope.
func relayStep(ctx context.Context, sc *stepwise.Scope, evs []*wire.TaskEvent) {
	for _, ev := range evs {
		switch ev.Type {
		case wire.TaskEventDelta:
			sc.Emit(ev.Text)
		case wire.TaskEventYield:
			_ = sc.Yield(ev.Name, ev.Data)
		case wire.TaskEventProgress:
			if ev.Fraction != nil {
				sc.Progress(*ev.Fraction, ev.Message)
			} else {
				sc.ProgressMessage(ev.Message)
			}
		case wire.TaskEventEvent:
			stepwise.RecordStepEvent(ctx, &stepwise.StepEvent{Type: "worker_event", Name: ev.Name, Payload: ev.Data})
		}
	}
}

// relayTool records a tool's live reports among its step's events (a
// tool call has no scope to stream through).
func relayTool(ctx context.Context, evs []*wire.TaskEvent) {
	for _, ev := range evs {
		var payload any = ev.Data
		if ev.Type == wire.TaskEventDelta || ev.Type == wire.TaskEventProgress {
			payload = ev
		}
		stepwise.RecordStepEvent(ctx, &stepwise.StepEvent{Type: "worker_" + ev.Type, Name: ev.Name, Payload: payload})
	}
}

// failure is the error of a failed task: transient ones are retried under
// the agent's retry policy.
func failure(f *wire.TaskFail) error {
	if f == nil {
		return errors.New("stepwise: task finished without an outcome")
	}
	class := steptype.ErrorPermanent
	if f.Class == wire.ErrorTransient {
		class = steptype.ErrorTransient
	}
	code := f.Code
	if code == "" {
		code = "worker_error"
	}
	return &llm.Error{Class: class, Code: code, Message: f.Message}
}

func decodeOutcome(t *store.Task) (*outcome, error) {
	var o outcome
	if err := json.Unmarshal(t.Result, &o); err != nil {
		return nil, fmt.Errorf("stepwise: task %s result: %w", t.ID, err)
	}
	return &o, nil
}

// Definition implements tool.Tool.
func (t *workerTool) Definition() llm.ToolDef {
	return llm.ToolDef{Name: t.def.Name, Description: t.def.Description, Parameters: t.params}
}

// ToolKey is the idempotency key of a worker tool call's attempt.
func ToolKey(idempotencyKey string, attempt int) string {
	return "tool/" + idempotencyKey + "/" + strconv.Itoa(attempt)
}

// toolAnswerKey is the idempotency key of a worker tool call made again
// after n of its human-input requests were answered: a task of its own.
func toolAnswerKey(key string, n int) string {
	if n == 0 {
		return key
	}
	return key + "/answers/" + strconv.Itoa(n)
}

// Call implements tool.Tool: the call is a task. A task parked with a
// human-input request parks the call (tool.InputNeeded); once answered,
// the call is a new task whose input carries the answers so far.
func (t *workerTool) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	in := wire.TaskInput{Arguments: c.Arguments, ToolCallID: c.ID}
	if n := len(c.Answers); n > 0 {
		in.Answers, in.Answer = c.Answers, c.Answers[n-1]
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	task, err := t.svc.serve(ctx, &store.Task{ID: stepwise.NewID(), Key: toolAnswerKey(ToolKey(c.IdempotencyKey, c.Attempt), len(c.Answers)), Kind: wire.TaskKindTool,
		Name: c.Name, Agent: t.agent, SessionID: c.SessionID, RunID: c.RunID, Attempt: c.Attempt, Input: input}, func(evs []*wire.TaskEvent) { relayTool(ctx, evs) })
	if err != nil {
		return nil, err
	}
	o, err := decodeOutcome(task)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{MetaWorker: o.Worker, MetaTask: task.ID}
	if in := o.Input; in != nil && in.Request != nil {
		return nil, &tool.InputNeeded{Prompt: in.Request.Prompt, Schema: in.Request.Schema, Context: in.Request.Context}
	}
	if o.Complete == nil {
		f := failure(o.Fail)
		var le *llm.Error
		if errors.As(f, &le) && le.Class == steptype.ErrorTransient {
			return nil, tool.Transient(f)
		}
		return &tool.Result{Content: f.Error(), IsError: true, Metadata: meta}, nil
	}
	c2 := o.Complete
	r := &tool.Result{Content: c2.Content, Output: c2.Output, IsError: c2.IsError, State: c2.State, Metadata: meta}
	for _, a := range c2.Attachments {
		r.Attachments = append(r.Attachments, tool.Attachment{Name: a.Name, ContentType: a.ContentType, Kind: a.Kind, Data: a.Data})
	}
	return r, nil
}

// create creates task t: claimed by a poll waiting for it in this process
// (handed over: a claim the fewer), else queued.
func (s *Service) create(ctx context.Context, t *store.Task) (*store.Task, error) {
	// Lazy: a task lost with a crash of the database is made again by
	// serve, which finds it missing; nothing waits for its WAL flush.
	p := &store.TaskCreateParams{Task: t, Lazy: true}
	w := s.hub.take(t.Agent, t.Name)
	if w != nil {
		p.Owner, p.Lease = w.worker, s.cfg.Lease
	}
	got, err := s.store.TaskCreate(context.WithoutCancel(ctx), p)
	if w != nil {
		if err == nil && got.ID == t.ID && got.State == store.TaskClaimed && got.Token == 1 {
			s.remember([]*store.Task{got})
			w.ch <- got
		} else {
			w.ch <- nil // the key's task existed, or none was made
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	return got, nil
}

// serve creates task t (or finds the one of its key), wakes pollers, and
// waits for it to finish: woken by the hub (the finishing request in this
// process hands over the finished task; the store's notification of
// another process makes it read the table), re-reading the table every
// Recheck besides. Events the worker reports meanwhile are passed to relay
// on this goroutine. On an error after the task exists, the task is
// returned with it.
func (s *Service) serve(ctx context.Context, t *store.Task, relay func([]*wire.TaskEvent)) (*store.Task, error) {
	// Watch the new id before the task exists: a task this call creates
	// cannot finish unseen, so it needs no read after the create.
	done, unwatch := s.hub.watchFinished(t.ID)
	evs, unrelay := s.hub.relay(t.ID)
	defer func() { unwatch(); unrelay() }()
	got, err := s.create(ctx, t)
	if err != nil {
		return nil, err
	}
	if got.Finished() {
		return got, nil
	}
	if got.State == store.TaskQueued {
		s.hub.taskQueued(got.Agent)
	}
	read := got.ID != t.ID // the task of the key existed: it may finish before the watch
	if read {
		unwatch()
		unrelay()
		done, unwatch = s.hub.watchFinished(got.ID)
		evs, unrelay = s.hub.relay(got.ID)
	}
	tick := time.NewTicker(s.cfg.Recheck)
	defer tick.Stop()
	for {
		if read {
			ft, err := s.store.TaskGet(ctx, &store.TaskGetParams{ID: got.ID})
			if err == nil && ft.Finished() {
				return ft, nil
			}
			if errors.Is(err, store.ErrNotFound) {
				// Created lazily and lost with a crash of the
				// database: made again under a new id, so that a late
				// report on the lost one is refused (task_not_found);
				// or the task of the key that exists by now is taken.
				unwatch()
				unrelay()
				again := *t
				again.ID = stepwise.NewID()
				return s.serve(ctx, &again, relay)
			}
			if err != nil && ctx.Err() != nil {
				return got, context.Cause(ctx)
			}
		}
		read = true
		select {
		case <-ctx.Done():
			return got, context.Cause(ctx)
		case ft := <-done:
			if ft != nil && ft.ID == got.ID && ft.Finished() {
				return ft, nil
			}
		case <-tick.C:
		case batch := <-evs:
			relay(batch)
			read = false
		}
	}
}
