package stepwise

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// UpdateMode says what the unfinished runs of an agent that started on an
// older version of its definition do once a changed definition is loaded
// (docs/state_machine.md, agent versions).
type UpdateMode string

// Update modes.
const (
	// UpdateContinue goes on with the new definition at the run's cursor
	// (mapped through StepMap when the step was renamed). The default.
	UpdateContinue UpdateMode = "continue"
	// UpdateRestart cancels the run and starts the new definition from
	// its start step, with the run's input, in a fork of the session taken
	// before the run's first step; the old attempt stays visible.
	UpdateRestart UpdateMode = "restart"
	// UpdateFail fails the run, with the two versions in the reason.
	UpdateFail UpdateMode = "fail"
)

// version returns a content hash of the definition: everything that
// changes what a run does and can be compared (instructions, model, tools
// and their schemas, sub-agents, step names, routing, limits, policies,
// reducers, hooks by name). Go handler code cannot be hashed: set
// Agent.Version to name a change that only handler code makes.
func (a *Agent) version() string {
	type toolDef struct {
		Name, Description string
		Parameters        json.RawMessage
	}
	d := struct {
		Name, Description, Instructions, Model, StartStep, AfterLLM string
		Tools                                                       []toolDef
		SubAgents, Steps, Hooks                                     []string
		Limits                                                      Limits
		Retry                                                       RetryPolicy
		Approvals                                                   map[string]ApprovalPolicy
		Context                                                     ContextPolicy
		Reducers                                                    map[string]string
		Temperature                                                 *float64
		MaxTokens                                                   int
	}{Name: a.Name, Description: a.Description, Instructions: a.Instructions, StartStep: a.StartStep, AfterLLM: a.AfterLLM,
		Limits: a.Limits, Retry: a.Retry, Approvals: a.Approvals, Context: a.Context, Temperature: a.Temperature, MaxTokens: a.MaxTokens}
	if a.Model != nil {
		d.Model = a.Model.Name()
	}
	for _, t := range a.Tools {
		def := t.Definition()
		d.Tools = append(d.Tools, toolDef{def.Name, def.Description, def.Parameters})
	}
	for _, s := range a.SubAgents {
		d.SubAgents = append(d.SubAgents, s.Name)
	}
	for n := range a.Steps {
		d.Steps = append(d.Steps, n)
	}
	sort.Strings(d.Steps)
	for _, h := range a.Hooks {
		d.Hooks = append(d.Hooks, h.Name+fmt.Sprint(h.Steps))
	}
	if len(a.Reducers) > 0 {
		d.Reducers = map[string]string{}
		for k, r := range a.Reducers {
			d.Reducers[k] = fmt.Sprint(r)
		}
	}
	b, _ := json.Marshal(d)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// runVersion is the agent version a run recorded, or "".
func runVersion(r *Run) string {
	var o runOptions
	if len(r.Options) > 0 {
		_ = json.Unmarshal(r.Options, &o)
	}
	return o.AgentVersion
}

// withVersion returns run options recording version v.
func withVersion(opts json.RawMessage, v string) json.RawMessage {
	var o map[string]any
	if len(opts) > 0 {
		_ = json.Unmarshal(opts, &o)
	}
	if o == nil {
		o = map[string]any{}
	}
	o["agent_version"] = v
	b, _ := json.Marshal(o)
	return b
}

// upgrade applies the agent's update policy to a run that recorded another
// version, before the execution runs a step. It reports whether the run
// ended (failed or restarted elsewhere); err is an engine error.
func (x *execution) upgrade() (ended bool, err error) {
	old, cur := runVersion(x.Run), x.agent.Version
	if old == cur {
		return false, x.checkCursor()
	}
	mode := x.agent.OnUpdate
	if x.Run.ParentRunID != "" || old == "" {
		mode = UpdateContinue // child runs follow their parent; unversioned runs adopt the definition
	}
	reason := fmt.Sprintf("agent %q changed from version %s to %s", x.agent.Name, orNone(old), cur)
	switch mode {
	case UpdateFail:
		serr := &StepError{Message: reason + " (on_update: fail)", Class: steptype.ErrorPermanent, Code: "agent_updated"}
		return true, x.finish(steptype.RunFailed, serr)
	case UpdateRestart:
		ctx := context.WithoutCancel(x.Ctx)
		plan, err := x.e.planRestart(ctx, x.Run)
		if err != nil {
			return false, err
		}
		if plan == nil {
			break // nothing ran yet: continue on the new definition
		}
		// The lease fences the run: the restart is created once.
		if err := x.e.restart(ctx, x.Run, plan); err != nil {
			return false, err
		}
		serr := &StepError{Message: fmt.Sprintf("%s (on_update: restart): %s", reason, plan), Class: steptype.ErrorPermanent, Code: "agent_updated"}
		return true, x.finish(steptype.RunCancelled, serr)
	}
	opts := withVersion(x.Run.Options, cur)
	if _, err := x.e.store.RunUpdate(context.WithoutCancel(x.Ctx), &store.RunUpdateParams{
		ID: x.Run.ID, Owner: x.e.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Options: opts, Now: x.e.now(),
	}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, x.Conflict(err)
		}
		return false, fmt.Errorf("record agent version: %w", err)
	}
	x.Mu.Lock()
	x.Run.Options = opts
	x.Mu.Unlock()
	return false, x.checkCursor()
}

// checkCursor maps a cursor naming a step the definition no longer has
// through StepMap; an unmapped one fails the run clearly.
func (x *execution) checkCursor() error {
	c := x.Run.Cursor
	if c == "" || x.agent.hasStep(c) {
		return nil
	}
	to, ok := x.agent.StepMap[c]
	if !ok || !x.agent.hasStep(to) {
		return nil // the loop fails the run with unknown_step, naming the step
	}
	if err := x.Commit(nil, runexec.Update{Cursor: &to}); err != nil {
		return err
	}
	return nil
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// restartPlan is where an agent-update restart will run: the run's first
// step (the fork point) and the ids of the fork and the new run, chosen
// before anything is created so that the old run's reason can name them.
type restartPlan struct {
	from          int64
	forkID, runID string
}

// planRestart returns the restart of r, or nil when r has no step yet
// (nothing to restart: it starts on the new definition anyway).
func (e *Engine) planRestart(ctx context.Context, r *Run) (*restartPlan, error) {
	first, err := e.store.StepList(ctx, &store.StepListParams{RunID: r.ID, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("restart run %s: %w", r.ID, err)
	}
	if len(first) == 0 {
		return nil, nil
	}
	return &restartPlan{from: first[0].Sequence, forkID: NewID(), runID: NewID()}, nil
}

func (p *restartPlan) String() string {
	return fmt.Sprintf("restarted as run %s in session %s", p.runID, p.forkID)
}

// restart starts the agent again from its start step with r's input in a
// fork of r's session taken before r's first step.
func (e *Engine) restart(ctx context.Context, r *Run, p *restartPlan) error {
	_, err := e.retry(ctx, RetryParams{SessionID: r.SessionID, From: p.from, Agent: r.Agent}, p.forkID, p.runID)
	return err
}

// reconcileWaiting applies the update policies to runs parked on input
// that started on another version of their agent, so that a restart or a
// failure does not wait for an answer. Runs that continue are left alone:
// their next execution records the new version.
func (e *Engine) reconcileWaiting(ctx context.Context) {
	for _, a := range e.Agents() {
		if a.OnUpdate != UpdateFail && a.OnUpdate != UpdateRestart {
			continue
		}
		runs, err := e.store.RunList(ctx, &store.RunListParams{Agent: a.Name, Statuses: []steptype.RunStatus{steptype.RunWaiting}})
		if err != nil {
			e.cfg.Logger.Warn("stepwise: agent update: list waiting runs", "agent", a.Name, "err", err)
			continue
		}
		for _, r := range runs {
			old := runVersion(r)
			if r.ParentRunID != "" || old == "" || old == a.Version {
				continue
			}
			if err := e.updateWaiting(ctx, a, r, old); err != nil {
				e.cfg.Logger.Warn("stepwise: agent update", "run", r.ID, "err", err)
			}
		}
	}
}

func (e *Engine) updateWaiting(ctx context.Context, a *Agent, r *Run, old string) error {
	reason := fmt.Sprintf("agent %q changed from version %s to %s (on_update: %s)", a.Name, old, a.Version, a.OnUpdate)
	status := steptype.RunFailed
	var plan *restartPlan
	if a.OnUpdate == UpdateRestart {
		var err error
		if plan, err = e.planRestart(ctx, r); err != nil {
			return err
		}
		if plan != nil {
			reason += ": " + plan.String()
		}
		status = steptype.RunCancelled
	}
	// The conditional update elects one instance (several may start at
	// once); only the winner creates the restart.
	done, err := e.store.RunUpdate(ctx, &store.RunUpdateParams{
		ID: r.ID, ExpectStatus: []steptype.RunStatus{steptype.RunWaiting}, Status: &status, ClearLease: true,
		Error: &StepError{Message: reason, Class: steptype.ErrorPermanent, Code: "agent_updated"}, Now: e.now(),
	})
	if errors.Is(err, store.ErrConflict) {
		return nil // answered, cancelled or settled by another instance meanwhile
	}
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	e.broker.Publish(&Event{Type: EventRunFinished, SessionID: done.SessionID, RunID: done.ID, Run: done, Time: e.now()})
	e.observeRunFinished(done, done.Error)
	if plan != nil {
		return e.restart(ctx, r, plan)
	}
	return nil
}

// validUpdateMode reports whether m is a known mode ("" is the default).
func validUpdateMode(m UpdateMode) bool {
	return m == "" || slices.Contains([]UpdateMode{UpdateContinue, UpdateRestart, UpdateFail}, m)
}
