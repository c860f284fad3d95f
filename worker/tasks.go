package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Poll claims tasks of the named agents for a worker, waiting up to the
// poll's wait while none is offered. It returns no task (and no error) when
// the wait passed.
func (s *Service) Poll(ctx context.Context, p *wire.TaskPoll) ([]*wire.Task, error) {
	if !workerID.MatchString(p.WorkerID) {
		return nil, invalid("worker_id %q: want 1-128 of letters, digits, _ . : -", p.WorkerID)
	}
	s.stats.polling(p.WorkerID, 1)
	defer s.stats.polling(p.WorkerID, -1)
	ts, err := s.poll(ctx, p)
	s.stats.claimedTasks(p.WorkerID, ts)
	return ts, err
}

func (s *Service) poll(ctx context.Context, p *wire.TaskPoll) ([]*wire.Task, error) {
	if len(p.Agents) == 0 {
		return nil, invalid("agents: name at least one agent")
	}
	if p.Max < 0 || p.Max > s.cfg.MaxTasks {
		return nil, invalid("max %d: want 1..%d", p.Max, s.cfg.MaxTasks)
	}
	if p.WaitMS < 0 || time.Duration(p.WaitMS)*time.Millisecond > s.cfg.MaxWait {
		return nil, invalid("wait_ms %d: want 0..%d", p.WaitMS, s.cfg.MaxWait.Milliseconds())
	}
	for _, a := range p.Agents {
		if s.registered(a) == nil {
			return nil, fmt.Errorf("%w: agent %q (register it first; a restarted server forgets registrations)", ErrNotServed, a)
		}
	}
	wait := s.cfg.Wait
	if p.WaitMS > 0 {
		wait = time.Duration(p.WaitMS) * time.Millisecond
	}
	request, stops := ctx, s.stopsOf(p.WorkerID)
	// gone: nobody will read this poll's answer (the worker left, or it
	// stopped gracefully while the poll was held): a task it claimed is
	// handed back at once rather than left to its lease.
	gone := func() bool { return request.Err() != nil || s.stopsOf(p.WorkerID) != stops }
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	woken, unwatch := s.hub.watchQueued(p.Agents)
	defer unwatch()
	tick := time.NewTicker(s.cfg.Recheck)
	defer tick.Stop()
	limit := max(1, p.Max)
	for {
		// Waiting already while claiming: a task created meanwhile is
		// handed over rather than left for the next claim.
		if gone() {
			return nil, nil
		}
		w := s.hub.wait(p.WorkerID, p.Agents, p.Handlers)
		ts, err := s.store.TaskClaim(context.WithoutCancel(ctx), &store.TaskClaimParams{Owner: p.WorkerID, Agents: p.Agents, Names: p.Handlers,
			Lease: s.cfg.Lease, Limit: limit})
		if err != nil || len(ts) > 0 {
			if !s.hub.unwait(w) {
				if h := <-w.ch; h != nil && err == nil && len(ts) < limit {
					ts = append(ts, h)
				} else if h != nil {
					s.handBack(request, h)
				}
			}
			if err != nil {
				return nil, err
			}
			if gone() {
				for _, t := range ts {
					s.handBack(request, t)
				}
				return nil, nil
			}
			s.remember(ts)
			out := make([]*wire.Task, len(ts))
			for i, t := range ts {
				out[i] = wireTask(t)
			}
			return out, nil
		}
		s.waiting.Add(1)
		var handed *store.Task
		received := false
		select {
		case handed = <-w.ch:
			received = true
		case <-ctx.Done():
		case <-woken:
		case <-tick.C:
		}
		if !received && !s.hub.unwait(w) {
			handed = <-w.ch // taken meanwhile: its create answers at once
		}
		s.waiting.Add(-1)
		if handed != nil {
			if gone() {
				s.handBack(request, handed)
				return nil, nil
			}
			return []*wire.Task{wireTask(handed)}, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
	}
}

// stopsOf returns the number of graceful stops of worker so far.
func (s *Service) stopsOf(worker string) uint64 {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	return s.stops[worker]
}

// handBack releases a task handed over to a poll that cannot take it.
func (s *Service) handBack(ctx context.Context, t *store.Task) {
	if _, err := s.Release(context.WithoutCancel(ctx), t.ID, t.Token); err != nil {
		s.cfg.Logger.Warn("stepwise: hand a task back", "task", t.ID, "err", err)
	}
}

func wireTask(t *store.Task) *wire.Task {
	w := &wire.Task{ID: t.ID, Token: t.Token, Kind: t.Kind, Name: t.Name, Agent: t.Agent, AgentVersion: t.AgentVersion,
		SessionID: t.SessionID, RunID: t.RunID, StepID: t.StepID, Attempt: t.Attempt, Claims: t.Claims,
		LeaseExpires: t.LeaseExpires, IdempotencyKey: t.Key}
	_ = json.Unmarshal(t.Input, &w.Input)
	return w
}

// fencedErr explains a call whose token does not hold task id: unknown,
// finished (dup reports whether token itself finished it) or fenced.
func (s *Service) fencedErr(ctx context.Context, id string, token int64) (dup bool, err error) {
	t, gerr := s.store.TaskGet(ctx, &store.TaskGetParams{ID: id})
	switch {
	case errors.Is(gerr, store.ErrNotFound):
		return false, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	case gerr != nil:
		return false, gerr
	case t.Finished() && t.Token == token:
		return true, nil
	case t.Finished():
		return false, fmt.Errorf("%w: task %s is %s (by token %d, not %d)", ErrTaskFinished, id, t.State, t.Token, token)
	case t.State == store.TaskClaimed && t.Token != token:
		s.stats.dropped(id, token, false)
		return false, fmt.Errorf("%w: task %s is held under token %d, not %d: the lease expired and the task was claimed again", ErrLeaseLost, id, t.Token, token)
	default:
		s.stats.dropped(id, token, false)
		return false, fmt.Errorf("%w: task %s is %s: its lease passed or it was released; token %d no longer holds it", ErrLeaseLost, id, t.State, token)
	}
}

// maxClaimed bounds the claims a Service remembers.
const maxClaimed = 4096

// remember keeps the tasks a poll claimed, so that their completion needs
// no read: what it checks (the kind, name and agent) and records (the
// owner of the token) does not change while the token holds, and the
// store's finish checks the token itself.
func (s *Service) remember(ts []*store.Task) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if len(s.claimed)+len(ts) > maxClaimed {
		// Claims whose worker went away and whose lease passed: a late
		// call reads the task instead.
		now := time.Now()
		for id, t := range s.claimed {
			if t.LeaseExpires.Before(now) {
				delete(s.claimed, id)
			}
		}
		if len(s.claimed)+len(ts) > maxClaimed {
			clear(s.claimed)
		}
	}
	for _, t := range ts {
		s.claimed[t.ID] = t
	}
}

// forget drops the remembered claim of task id.
func (s *Service) forget(id string) {
	s.claimMu.Lock()
	delete(s.claimed, id)
	s.claimMu.Unlock()
}

// claim returns the remembered claim of task id under token, or nil.
func (s *Service) claim(id string, token int64) *store.Task {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if t := s.claimed[id]; t != nil && t.Token == token {
		return t
	}
	return nil
}

// held returns task id if token holds it: the claim this process made
// under token (the store's finish checks that it still holds), or the
// task as stored.
func (s *Service) held(ctx context.Context, id string, token int64) (*store.Task, error) {
	if t := s.claim(id, token); t != nil {
		return t, nil
	}
	t, err := s.store.TaskGet(ctx, &store.TaskGetParams{ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	if t.State != store.TaskClaimed || t.Token != token {
		dup, ferr := s.fencedErr(ctx, id, token)
		if dup {
			return t, errDuplicate
		}
		return nil, ferr
	}
	return t, nil
}

// errDuplicate: the token already finished the task (a repeated call).
var errDuplicate = errors.New("stepwise: duplicate")

// Heartbeat renews a task's lease.
func (s *Service) Heartbeat(ctx context.Context, id string, token int64) (*wire.TaskLease, error) {
	t, err := s.store.TaskRenew(ctx, &store.TaskRenewParams{ID: id, Token: token, Lease: s.cfg.Lease})
	if err != nil {
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			if _, ferr := s.fencedErr(ctx, id, token); ferr != nil {
				return nil, ferr
			}
			return nil, fmt.Errorf("%w: task %s", ErrTaskFinished, id)
		}
		return nil, err
	}
	s.stats.seen(t.Owner)
	lease := &wire.TaskLease{LeaseExpires: t.LeaseExpires}
	if r, err := s.store.RunGet(ctx, &store.RunGetParams{ID: t.RunID}); err == nil && r.Status.Terminal() {
		lease.Cancel = true
	}
	return lease, nil
}

// Events relays a running task's reports to its handler and renews its
// lease.
func (s *Service) Events(ctx context.Context, id string, req *wire.TaskEvents) (*wire.TaskLease, error) {
	if len(req.Events) > DefaultEventsBatch {
		return nil, invalid("events: %d in one report, at most %d", len(req.Events), DefaultEventsBatch)
	}
	for i, ev := range req.Events {
		if err := checkEvent(ev); err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	lease, err := s.Heartbeat(ctx, id, req.Token)
	if err != nil {
		return nil, err
	}
	s.hub.send(id, req.Events)
	return lease, nil
}

func checkEvent(ev *wire.TaskEvent) error {
	if ev == nil {
		return invalid("an event is null")
	}
	switch ev.Type {
	case wire.TaskEventDelta:
	case wire.TaskEventYield, wire.TaskEventEvent:
		if ev.Name == "" {
			return invalid("a %s event needs a name", ev.Type)
		}
	case wire.TaskEventProgress:
		if ev.Fraction != nil && (*ev.Fraction < 0 || *ev.Fraction > 1) {
			return invalid("progress fraction %v: want 0..1", *ev.Fraction)
		}
	default:
		return invalid("event type %q: want delta, yield, progress or event", ev.Type)
	}
	if len(ev.Data) > 0 && !json.Valid(ev.Data) {
		return invalid("event data is not JSON")
	}
	return nil
}

// Complete records a task's result once it is valid for its step or tool.
func (s *Service) Complete(ctx context.Context, id string, c *wire.TaskComplete) (*wire.TaskResult, error) {
	t, err := s.held(ctx, id, c.Token)
	if err != nil {
		return dupOr(t, err)
	}
	if err := s.checkComplete(t, c); err != nil {
		return nil, err
	}
	return s.finish(ctx, t, store.TaskCompleted, &outcome{Complete: c})
}

// checkComplete validates a completion against its task's step or tool.
func (s *Service) checkComplete(t *store.Task, c *wire.TaskComplete) error {
	if len(c.Output) > 0 && !json.Valid(c.Output) {
		return badResult("output is not JSON")
	}
	if len(c.State) > 0 {
		var m map[string]any
		if err := json.Unmarshal(c.State, &m); err != nil || m == nil {
			return badResult("state must be a JSON object (an update of the run's state)")
		}
	}
	reg := s.registered(t.Agent)
	if reg == nil {
		return fmt.Errorf("%w: agent %q", ErrNotServed, t.Agent)
	}
	if t.Kind == wire.TaskKindStep {
		switch {
		case c.Next == "":
			return badResult("a step task needs next: a step of agent %q, llm, tools or end", t.Agent)
		case !hasStep(reg.agent, c.Next):
			return badResult("next %q is no step of agent %q", c.Next, t.Agent)
		case c.IsError || len(c.Attachments) > 0:
			return badResult("is_error and attachments are for tool tasks")
		}
		return nil
	}
	if c.Next != "" || c.Decision != nil {
		return badResult("next and decision are for step tasks")
	}
	tl := reg.tools[t.Name]
	if tl == nil {
		return badResult("agent %q no longer serves tool %q", t.Agent, t.Name)
	}
	if tl.output != nil && !c.IsError {
		var v any
		if len(c.Output) > 0 {
			_ = json.Unmarshal(c.Output, &v)
		}
		if err := tl.output.Validate(v); err != nil {
			return badResult("output does not match the output_schema of tool %q: %v", t.Name, err)
		}
	}
	return nil
}

// Fail records a task's failure.
func (s *Service) Fail(ctx context.Context, id string, f *wire.TaskFail) (*wire.TaskResult, error) {
	if f.Message == "" {
		return nil, invalid("message is required")
	}
	if f.Class != "" && f.Class != wire.ErrorTransient && f.Class != wire.ErrorPermanent {
		return nil, invalid("class %q: want transient or permanent", f.Class)
	}
	t, err := s.held(ctx, id, f.Token)
	if err != nil {
		return dupOr(t, err)
	}
	return s.finish(ctx, t, store.TaskFailed, &outcome{Fail: f})
}

// Input parks a step task with a human-input request.
func (s *Service) Input(ctx context.Context, id string, in *wire.TaskInputRequest) (*wire.TaskResult, error) {
	if in.Request == nil || in.Request.Prompt == "" {
		return nil, invalid("request.prompt is required")
	}
	if in.Request.OnExpire != "" && in.Request.OnExpire != "fail" && in.Request.OnExpire != "default" {
		return nil, invalid("request.on_expire %q: want fail or default", in.Request.OnExpire)
	}
	if in.Request.Approval != nil {
		return nil, invalid("request.approval is for the engine's tool approvals")
	}
	if len(in.Request.Schema) > 0 {
		if _, err := compile(in.Request.Schema); err != nil {
			return nil, invalid("request.schema: %v", err)
		}
	}
	if len(in.State) > 0 {
		var m map[string]any
		if err := json.Unmarshal(in.State, &m); err != nil || m == nil {
			return nil, badResult("state must be a JSON object")
		}
	}
	t, err := s.held(ctx, id, in.Token)
	if err != nil {
		return dupOr(t, err)
	}
	if t.Kind == wire.TaskKindTool {
		// A tool call parks as the engine's tool input request: a prompt,
		// a schema and a context, answered (or not) by a person.
		r := in.Request
		switch {
		case !r.ExpiresAt.IsZero() || r.OnExpire != "" || len(r.Default) > 0:
			return nil, invalid("request of a tool task: expires_at, on_expire and default are for step tasks (a tool's request has prompt, schema, context)")
		case len(in.State) > 0 || in.Content != "":
			return nil, invalid("state and content are for step tasks: a tool's result carries its state once the call completes")
		}
	}
	return s.finish(ctx, t, store.TaskParked, &outcome{Input: in})
}

func dupOr(t *store.Task, err error) (*wire.TaskResult, error) {
	if errors.Is(err, errDuplicate) {
		return &wire.TaskResult{ID: t.ID, State: t.State, Duplicate: true}, nil
	}
	return nil, err
}

// finish records o as task t's outcome under its token.
func (s *Service) finish(ctx context.Context, t *store.Task, state string, o *outcome) (*wire.TaskResult, error) {
	o.Worker = t.Owner
	// The token is part of the request, not of the result.
	switch {
	case o.Complete != nil:
		c := *o.Complete
		c.Token, o.Complete = 0, &c
	case o.Fail != nil:
		f := *o.Fail
		f.Token, o.Fail = 0, &f
	case o.Input != nil:
		in := *o.Input
		in.Token, o.Input = 0, &in
	}
	res, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	// The step waiting for the outcome takes it as soon as it is
	// visible: its commit makes the finish durable with it, so neither
	// waits for a WAL flush of the other (docs/workers.md); the worker
	// hears once the finish is durable. When that step waits in this
	// process the finish is not announced: a waiter elsewhere (a
	// re-execution after a lease passed) reads the table within Recheck.
	handed := false
	done, err := s.store.TaskFinish(ctx, &store.TaskFinishParams{ID: t.ID, Token: t.Token, State: state, Result: res,
		Quiet: s.hub.waited(t.ID), Visible: func(ft *store.Task) { handed = true; s.hub.taskFinished(ft.ID, ft) }})
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		s.forget(t.ID)
		dup, ferr := s.fencedErr(ctx, t.ID, t.Token)
		if dup {
			return &wire.TaskResult{ID: t.ID, State: state, Duplicate: true}, nil
		}
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	s.forget(t.ID)
	s.stats.finished(t.Owner, t.ID, state)
	if !handed {
		s.hub.taskFinished(t.ID, done)
	}
	return &wire.TaskResult{ID: done.ID, State: done.State}, nil
}

// Release hands one task back at once.
func (s *Service) Release(ctx context.Context, id string, token int64) (*wire.TaskResult, error) {
	ts, err := s.store.TaskRelease(ctx, &store.TaskReleaseParams{ID: id, Token: token})
	if err != nil {
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			_, ferr := s.fencedErr(ctx, id, token)
			if ferr == nil {
				ferr = fmt.Errorf("%w: task %s", ErrTaskFinished, id)
			}
			return nil, ferr
		}
		return nil, err
	}
	s.forget(id)
	s.stats.dropped(id, token, true)
	s.hub.taskQueued(ts[0].Agent)
	return &wire.TaskResult{ID: id, State: store.TaskQueued}, nil
}

// ReleaseWorker hands back every task a worker holds.
func (s *Service) ReleaseWorker(ctx context.Context, worker string) (int, error) {
	if !workerID.MatchString(worker) {
		return 0, invalid("worker_id %q: want 1-128 of letters, digits, _ . : -", worker)
	}
	// The worker's polls held now are of before its stop: they end, and
	// hand back what they claim meanwhile (counted before the release, so
	// a claim that commits after it is seen).
	s.claimMu.Lock()
	s.stops[worker]++
	s.claimMu.Unlock()
	s.hub.wakeAll()
	ts, err := s.store.TaskRelease(ctx, &store.TaskReleaseParams{Owner: worker})
	if err != nil {
		return 0, err
	}
	for _, t := range ts {
		s.forget(t.ID)
		s.stats.dropped(t.ID, t.Token, true)
		s.hub.taskQueued(t.Agent)
	}
	return len(ts), nil
}
