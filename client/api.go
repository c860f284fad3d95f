package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// AgentInfo describes an agent registered on the server.
type AgentInfo = wire.Agent

// AgentLimits are an agent's run limits.
type AgentLimits = wire.AgentLimits

// Agents lists the registered agents.
func (c *Client) Agents(ctx context.Context) ([]*AgentInfo, error) {
	var out wire.AgentList
	_, err := c.do(ctx, http.MethodGet, "/v1/agents", nil, nil, &out)
	return out.Agents, err
}

// Agent describes one agent.
func (c *Client) Agent(ctx context.Context, name string) (*AgentInfo, error) {
	var out AgentInfo
	if _, err := c.do(ctx, http.MethodGet, "/v1/agents/"+seg(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Run returns a run.
func (c *Client) Run(ctx context.Context, runID string) (*steptype.Run, error) {
	var out steptype.Run
	if _, err := c.do(ctx, http.MethodGet, "/v1/runs/"+seg(runID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel cancels an unfinished run.
func (c *Client) Cancel(ctx context.Context, runID, reason string) (*steptype.Run, error) {
	var out steptype.Run
	body := wire.CancelRequest{Reason: reason}
	if _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(runID)+"/cancel", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Pending lists the pending input requests of a run, or of every run when
// runID is empty.
func (c *Client) Pending(ctx context.Context, runID string) ([]*wire.PendingInput, error) {
	path := "/v1/inputs"
	if runID != "" {
		path = "/v1/runs/" + seg(runID) + "/inputs"
	}
	var out wire.PendingList
	_, err := c.do(ctx, http.MethodGet, path, nil, nil, &out)
	return out.Inputs, err
}

// Answer answers a pending input request and returns the answered step.
// An invalid answer fails with stepwise.ErrInvalidAnswer, a second answer
// with stepwise.ErrAlreadyAnswered.
func (c *Client) Answer(ctx context.Context, runID, requestID string, answer json.RawMessage) (*steptype.Step, error) {
	var out wire.AnswerResult
	body := wire.AnswerRequest{Answer: answer}
	if len(answer) == 0 {
		body.Answer = json.RawMessage("null")
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(runID)+"/inputs/"+seg(requestID), nil, body, &out); err != nil {
		return nil, err
	}
	return out.Step, nil
}

// SessionQuery filters and pages Sessions.
type SessionQuery = wire.SessionQuery

// SessionPage is one page of sessions.
type SessionPage = wire.SessionPage

// Sessions lists sessions, newest activity first.
func (c *Client) Sessions(ctx context.Context, q SessionQuery) (*SessionPage, error) {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("agent", q.Agent)
	set("parent", q.Parent)
	set("q", q.Query)
	set("cursor", q.Cursor)
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out SessionPage
	if _, err := c.do(ctx, http.MethodGet, "/v1/sessions", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSession creates an empty session, e.g. to ingest steps into.
func (c *Client) CreateSession(ctx context.Context, agent, title string) (*steptype.Session, error) {
	var out steptype.Session
	body := wire.CreateSessionRequest{Agent: agent, Title: title}
	if _, err := c.do(ctx, http.MethodPost, "/v1/sessions", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Session returns a session.
func (c *Client) Session(ctx context.Context, id string) (*steptype.Session, error) {
	var out steptype.Session
	if _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSession deletes a session (refused with stepwise.ErrConflict while
// forks depend on it).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/sessions/"+seg(id), nil, nil, nil)
	return err
}

// Summary summarizes a session.
func (c *Client) Summary(ctx context.Context, id string) (*wire.Summary, error) {
	var out wire.Summary
	if _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/summary", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Context returns the exact model request the next llm step of a session
// would send; agent overrides the session's agent when not empty.
func (c *Client) Context(ctx context.Context, sessionID, agent string) (*wire.ModelRequest, error) {
	var q url.Values
	if agent != "" {
		q = url.Values{"agent": {agent}}
	}
	var out wire.ModelRequest
	if _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(sessionID)+"/context", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Fork forks a session at p.At (see stepwise.Engine.Fork).
func (c *Client) Fork(ctx context.Context, p wire.ForkParams) (*steptype.Session, error) {
	body := wire.ForkRequest{Sequence: p.At, Edit: p.Edit, Title: p.Title}
	var out steptype.Session
	if _, err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(p.SessionID)+"/fork", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Retry regenerates a session from p.From (see stepwise.Engine.Retry); the
// returned run is queued on the server.
func (c *Client) Retry(ctx context.Context, p wire.RetryParams) (*steptype.Run, error) {
	body := wire.RetryRequest{Sequence: p.From, Destructive: p.Destructive, Agent: p.Agent}
	var out wire.RunCreated
	if _, err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(p.SessionID)+"/retry", nil, body, &out); err != nil {
		return nil, err
	}
	return out.Run, nil
}

// Replay replays a session reusing recorded outputs (see
// stepwise.Engine.Replay); the returned run is queued on the server.
func (c *Client) Replay(ctx context.Context, p wire.ReplayParams) (*steptype.Run, error) {
	body := wire.ReplayRequest{LiveTools: p.LiveTools, AllToolsLive: p.AllToolsLive, Agent: p.Agent}
	var out wire.RunCreated
	if _, err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(p.SessionID)+"/replay", nil, body, &out); err != nil {
		return nil, err
	}
	return out.Run, nil
}

// Forks lists the direct forks of a session.
func (c *Client) Forks(ctx context.Context, id string) ([]*steptype.Session, error) {
	var out wire.SessionList
	_, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/forks", nil, nil, &out)
	return out.Sessions, err
}

// Tree returns the fork tree of a session, from its root ancestor.
func (c *Client) Tree(ctx context.Context, id string) (*wire.ForkTree, error) {
	var out wire.ForkTree
	if _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/tree", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StepQuery selects steps of a session by sequence range.
type StepQuery = wire.StepQuery

// Steps returns steps of a session in sequence order (lineage included).
func (c *Client) Steps(ctx context.Context, q StepQuery) ([]*steptype.Step, error) {
	v := url.Values{}
	if q.StartSeq != 0 {
		v.Set("start_seq", strconv.FormatInt(q.StartSeq, 10))
	}
	if q.EndSeq != 0 {
		v.Set("end_seq", strconv.FormatInt(q.EndSeq, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out wire.StepList
	_, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(q.SessionID)+"/steps", v, nil, &out)
	return out.Steps, err
}

// Step returns the step of a session at a sequence.
func (c *Client) Step(ctx context.Context, sessionID string, sequence int64) (*steptype.Step, error) {
	var out steptype.Step
	if _, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/sessions/%s/steps/%d", seg(sessionID), sequence), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Truncate deletes a session's steps >= from and returns how many were
// deleted (refused with stepwise.ErrConflict while a fork depends on them).
func (c *Client) Truncate(ctx context.Context, sessionID string, from int64) (int64, error) {
	var out wire.TruncateResult
	q := url.Values{"start_seq": {strconv.FormatInt(from, 10)}}
	_, err := c.do(ctx, http.MethodDelete, "/v1/sessions/"+seg(sessionID)+"/steps", q, nil, &out)
	return out.Deleted, err
}

// Ingest records steps produced elsewhere into a session and returns them
// as stored (with sequences).
func (c *Client) Ingest(ctx context.Context, p wire.IngestParams) ([]*steptype.Step, error) {
	body := wire.StepList{Steps: p.Steps}
	var out wire.StepList
	_, err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(p.SessionID)+"/steps", nil, body, &out)
	return out.Steps, err
}

// Workers lists the workers the server process has seen since it started,
// and what each did through it (GET /v1/workers).
func (c *Client) Workers(ctx context.Context) (*wire.WorkerList, error) {
	var out wire.WorkerList
	if _, err := c.do(ctx, http.MethodGet, "/v1/workers", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
