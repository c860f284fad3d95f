package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/stepwise-run/stepwise/internal/lineage"

	"github.com/stepwise-run/stepwise/internal/sessionsum"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// ForkParams fork a session.
type ForkParams = wire.ForkParams

// Fork creates a new session sharing the first At steps of another, in O(1).
// The parent never changes. Forks of forks work.
func (e *Engine) Fork(ctx context.Context, p ForkParams) (*Session, error) {
	parent, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", p.SessionID, err)
	}
	if p.At < 1 || p.At > parent.LastSequence {
		return nil, fmt.Errorf("%w: fork point %d is outside session %s (1..%d)", store.ErrInvalid, p.At, p.SessionID, parent.LastSequence)
	}
	keep := p.At
	var edited *Step
	if p.Edit != nil {
		orig, err := e.store.StepGet(ctx, &store.StepGetParams{SessionID: p.SessionID, Sequence: p.At})
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", p.At, err)
		}
		if !orig.InMessageContext() || orig.Status == steptype.StepWaiting {
			return nil, fmt.Errorf("%w: step %d is a %s step without a message to edit", store.ErrInvalid, p.At, orig.Kind)
		}
		c := *orig
		c.ID, c.Sequence, c.SessionID, c.Content = NewID(), 0, "", *p.Edit
		c.Metadata = map[string]any{"edited_from": orig.ID}
		edited = &c
		keep = p.At - 1
	}
	verb, where := "fork", fmt.Sprintf("at #%d", p.At)
	if edited != nil {
		verb = "edit"
	}
	title := lineage.DerivedTitle(ctx, e.store, p.Title, verb, parent, where)
	var s *Session
	if keep == 0 {
		// Editing step 1 shares nothing: a new root session that notes its
		// origin and, as every fork, carries the parent's metadata.
		meta, merr := withMetadata(parent.Metadata, map[string]any{"forked_from": parent.ID, "edited_sequence": p.At})
		if merr != nil {
			return nil, fmt.Errorf("fork: %w", merr)
		}
		s, err = e.store.SessionCreate(ctx, &store.SessionCreateParams{ID: NewID(), Agent: parent.Agent, Title: title, Metadata: meta, Now: e.now()})
	} else {
		s, err = e.store.SessionFork(ctx, &store.SessionForkParams{ID: NewID(), ParentID: p.SessionID, Sequence: keep, Title: title, Now: e.now()})
	}
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	if edited != nil {
		edited.SessionID = s.ID
		if _, err := e.store.StepAppend(ctx, &store.StepAppendParams{Steps: []*Step{edited}}); err != nil {
			return nil, fmt.Errorf("fork: write edited step: %w", err)
		}
		return e.store.SessionGet(ctx, &store.SessionGetParams{ID: s.ID})
	}
	return s, nil
}

// withMetadata returns the session metadata base (a JSON object, or
// empty) with the keys of add set.
func withMetadata(base json.RawMessage, add map[string]any) (json.RawMessage, error) {
	m := map[string]any{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &m); err != nil || m == nil {
			m = map[string]any{} // not an object: only add's keys
		}
	}
	for k, v := range add {
		m[k] = v
	}
	return json.Marshal(m)
}

// ForkTree is a session and its forks, recursively.
type ForkTree = wire.ForkTree

// Forks lists the direct forks of a session.
func (e *Engine) Forks(ctx context.Context, sessionID string) ([]*Session, error) {
	return lineage.Forks(ctx, e.store, sessionID)
}

// Tree returns the fork tree rooted at the root ancestor of a session.
func (e *Engine) Tree(ctx context.Context, sessionID string) (*ForkTree, error) {
	return lineage.Tree(ctx, e.store, sessionID)
}

// TitleOf is the title a session gets from its first message when it is
// created without one (StartParams.Title empty): the message's start, on
// one line, at most 60 characters. It is "" for a blank message.
func TitleOf(message string) string { return lineage.TitleOf(message) }

// RetryParams regenerate a session from a step.
type RetryParams = wire.RetryParams

// Retry regenerates a session from step From. By default it is
// non-destructive: it forks at From-1 and starts a run there, leaving the
// old attempt visible. It returns the run (queued; execute it with Execute
// or let the background executor take it).
func (e *Engine) Retry(ctx context.Context, p RetryParams) (*Run, error) {
	return e.retry(ctx, p, "", "")
}

// retry is Retry; forkID and runID, when set, are the ids of the fork and
// the run (an agent-update restart names them before creating them).
func (e *Engine) retry(ctx context.Context, p RetryParams, forkID, runID string) (*Run, error) {
	src, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", p.SessionID, err)
	}
	if p.From < 1 || p.From > src.LastSequence {
		return nil, fmt.Errorf("%w: retry point %d is outside session %s (1..%d)", store.ErrInvalid, p.From, p.SessionID, src.LastSequence)
	}
	step, err := e.store.StepGet(ctx, &store.StepGetParams{SessionID: p.SessionID, Sequence: p.From})
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", p.From, err)
	}
	agentName := p.Agent
	if agentName == "" {
		agentName = src.Agent
	}
	a, err := e.Agent(agentName)
	if err != nil {
		return nil, err
	}
	target := src.ID
	if p.Destructive {
		if _, err := e.store.StepTruncate(ctx, &store.StepTruncateParams{SessionID: src.ID, StartSeq: p.From}); err != nil {
			return nil, fmt.Errorf("truncate: %w", err)
		}
	} else {
		var fork *Session
		title := lineage.DerivedTitle(ctx, e.store, "", "retry", src, fmt.Sprintf("from #%d", p.From))
		if p.From == 1 {
			// Nothing to share: a new root session, with the source's
			// metadata as a fork gets it.
			fork, err = e.store.SessionCreate(ctx, &store.SessionCreateParams{ID: orNewID(forkID), Agent: src.Agent, Title: title, Metadata: src.Metadata, Now: e.now()})
		} else {
			fork, err = e.store.SessionFork(ctx, &store.SessionForkParams{ID: orNewID(forkID), ParentID: src.ID, Sequence: p.From - 1, Title: title, Now: e.now()})
		}
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		target = fork.ID
	}
	r := &Run{ID: orNewID(runID), SessionID: target, Agent: a.Name, Status: steptype.RunQueued, Options: withVersion(nil, a.Version), CreatedAt: e.now()}
	if step.Kind == steptype.KindUser {
		r.Input = step.Content
	} else {
		r.Cursor = retryCursor(a, step)
	}
	created, err := e.store.RunCreate(ctx, &store.RunCreateParams{Run: r})
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	e.wake()
	return created, nil
}

// Truncate deletes a session's steps >= from (a destructive retry).
// Refused with ErrConflict while a fork depends on those steps or a
// run of the session is unfinished: the store checks both in the
// transaction that truncates, for every caller (Retry with Destructive
// included).
func (e *Engine) Truncate(ctx context.Context, sessionID string, from int64) (int64, error) {
	n, err := e.store.StepTruncate(ctx, &store.StepTruncateParams{SessionID: sessionID, StartSeq: from})
	if err != nil {
		return 0, fmt.Errorf("truncate session %q from %d: %w", sessionID, from, err)
	}
	return n, nil
}

// Summary describes a session.
type Summary = wire.Summary

// Summarize computes a session's summary: counts per kind and role, tokens,
// cost, duration, sequence range, runs and forks.
func (e *Engine) Summarize(ctx context.Context, sessionID string) (*Summary, error) {
	s, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", sessionID, err)
	}
	sum := &Summary{SessionID: s.ID, ByKind: map[steptype.Kind]int{}, ByRole: map[steptype.Role]int{}, Runs: map[steptype.RunStatus]int{},
		ParentID: s.ParentSessionID, ForkSequence: s.ForkSequence}
	if err := sessionsum.Totals(ctx, e.store, s, sum); err != nil {
		return nil, err
	}
	forks, err := e.Forks(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sum.Forks = len(forks)
	return sum, nil
}

// DeleteSession deletes a session with its steps and runs; refused while
// forks depend on it or a run is unfinished.
func (e *Engine) DeleteSession(ctx context.Context, sessionID string) error {
	runs, err := e.store.RunList(ctx, &store.RunListParams{SessionID: sessionID, Statuses: []steptype.RunStatus{steptype.RunRunning}})
	if err != nil {
		return err
	}
	if len(runs) > 0 {
		return fmt.Errorf("%w: session %s has a running run %s; cancel it first", ErrConflict, sessionID, runs[0].ID)
	}
	if err := e.store.SessionDelete(ctx, &store.SessionDeleteParams{ID: sessionID}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("delete session %q: forks depend on it: %w", sessionID, err)
		}
		return fmt.Errorf("delete session %q: %w", sessionID, err)
	}
	return nil
}

// orNewID returns id, or a new id when it is empty.
func orNewID(id string) string {
	if id == "" {
		return NewID()
	}
	return id
}

// retryCursor is where a run regenerating a session from step s starts (the
// session keeps the steps before s): the graph step that produced s, so the
// run follows the step graph from there.
//
//   - a tool, agent or input step of a tool call (a result, a sub-agent
//     call, an approval, an ask_human) — and any step of a sub-agent's own
//     run — was produced by "tools": the tools step runs again every call of
//     the last assistant message that has no result in the kept steps, so
//     a retry inside a parallel tool call re-runs the missing calls and the
//     next model call sees every result;
//   - an llm step, and the "context" system step an llm step records, by
//     "llm";
//   - an error step by the step whose attempt failed (its name);
//   - a custom or decision step, or an input step a custom step asked for,
//     by that step;
//   - anything else, or a step the agent does not have, restarts at the
//     agent's start step.
//
// (A user step is not routed: the run gets its content as input.)
func retryCursor(a *Agent, s *Step) string {
	switch {
	case s.Hop > 0:
		return StepTools
	case s.Kind == steptype.KindSystem && s.Name == "context":
		return StepLLM
	case s.Kind == steptype.KindLLM:
		return StepLLM
	case s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent:
		return StepTools
	}
	if s.Name != "" && s.Name != StepEnd && a.hasStep(s.Name) {
		return s.Name
	}
	return a.StartStep
}

// IngestParams record steps produced by an agent running elsewhere.
type IngestParams = wire.IngestParams

// Ingest appends externally produced steps to a session (any language can
// record into Stepwise and get the same log, streams and views). Steps are
// validated (kind, role/kind consistency, status); sequences are assigned
// by the store unless given, in which case they must be the next ones.
// Re-sending a step with the same id is a no-op.
func (e *Engine) Ingest(ctx context.Context, p IngestParams) ([]*Step, error) {
	if _, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID}); err != nil {
		return nil, fmt.Errorf("session %q: %w", p.SessionID, err)
	}
	if len(p.Steps) == 0 {
		return nil, fmt.Errorf("%w: no steps", store.ErrInvalid)
	}
	now := e.now()
	for i, s := range p.Steps {
		if !s.Kind.Valid() {
			return nil, fmt.Errorf("%w: steps[%d]: unknown kind %q", store.ErrInvalid, i, s.Kind)
		}
		switch s.Role {
		case steptype.RoleNone, steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool, steptype.RoleSystem:
		default:
			return nil, fmt.Errorf("%w: steps[%d]: unknown role %q", store.ErrInvalid, i, s.Role)
		}
		if s.Role == steptype.RoleTool && s.ToolCallID == "" {
			return nil, fmt.Errorf("%w: steps[%d]: a tool message needs tool_call_id", store.ErrInvalid, i)
		}
		if s.SessionID != "" && s.SessionID != p.SessionID {
			return nil, fmt.Errorf("%w: steps[%d]: session_id %q does not match %q", store.ErrInvalid, i, s.SessionID, p.SessionID)
		}
		if s.ID == "" {
			s.ID = NewID()
		}
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		if s.CreatedAt.IsZero() {
			s.CreatedAt = now
		}
		if c := s.Metrics.Cost; math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return nil, fmt.Errorf("%w: steps[%d]: cost must be a finite USD amount >= 0, not %v", store.ErrInvalid, i, c)
		}
		s.SessionID = p.SessionID
	}
	for _, s := range p.Steps {
		e.priceIngested(s)
	}
	unlock := e.lockSession(p.SessionID)
	defer unlock()
	out, err := e.store.StepAppend(ctx, &store.StepAppendParams{Steps: p.Steps, Runs: p.Runs})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	for _, s := range out {
		e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: s.SessionID, RunID: s.RunID, StepName: s.Name, Step: s, Time: now})
	}
	return out, nil
}

// priceIngested gives an ingested step that reports a model and tokens but
// no cost the cost the price table computes, as an llm step run here would
// have. The model is looked up as given ("openai:gpt-4o-mini", "gpt-4o"),
// then under its provider ("openai" + "gpt-4o"). A cost the sender
// reported is kept.
func (e *Engine) priceIngested(s *Step) {
	m := &s.Metrics
	if m.Cost != 0 || m.Model == "" || m.InputTokens+m.OutputTokens == 0 {
		return
	}
	price, ok := e.cfg.Prices.Lookup(m.Model)
	if !ok && m.Provider != "" && !strings.Contains(m.Model, ":") {
		price, ok = e.cfg.Prices.Lookup(m.Provider + ":" + m.Model)
	}
	if ok {
		m.Cost = price.Cost(m.InputTokens, m.OutputTokens, m.CachedTokens)
	}
}

// CreateSession creates an empty session (for ingest, or to choose its
// title before the first run).
func (e *Engine) CreateSession(ctx context.Context, agent, title string) (*Session, error) {
	return e.store.SessionCreate(ctx, &store.SessionCreateParams{ID: NewID(), Agent: agent, Title: title, Now: e.now()})
}
