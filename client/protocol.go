package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/stepwise-run/stepwise"
)

var _ stepwise.Client = (*Client)(nil)

// initiateRequest is the body of POST /v1/runs.
type initiateRequest struct {
	Agent     string          `json:"agent"`
	Input     string          `json:"input"`
	SessionID string          `json:"session_id,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Title     string          `json:"title,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

type runCreated struct {
	Run        *stepwise.Run        `json:"run"`
	Invocation *stepwise.Invocation `json:"invocation"`
}

// Initiate starts a run of agent with input on the server, where the
// background executor runs it, and returns its invocation. Options set the
// session (stepwise.InSession), initial state and title; a replay is started
// with Replay instead.
func (c *Client) Initiate(ctx context.Context, agent, input string, opts ...stepwise.InitiateOption) (*stepwise.Invocation, error) {
	_, inv, err := c.StartRun(ctx, agent, input, opts...)
	return inv, err
}

// StartRun is Initiate returning the created run as well.
func (c *Client) StartRun(ctx context.Context, agent, input string, opts ...stepwise.InitiateOption) (*stepwise.Run, *stepwise.Invocation, error) {
	p := stepwise.StartParams{Agent: agent, Input: input}
	for _, o := range opts {
		o(&p)
	}
	if p.Replay != nil {
		return nil, nil, fmt.Errorf("stepwise client: replay options are not sent by Initiate; use Replay")
	}
	req := initiateRequest{Agent: p.Agent, Input: p.Input, SessionID: p.SessionID, Title: p.Title, Metadata: p.Metadata}
	if p.State != nil {
		b, err := json.Marshal(p.State)
		if err != nil {
			return nil, nil, fmt.Errorf("stepwise client: state: %w", err)
		}
		req.State = b
	}
	var out runCreated
	if _, err := c.do(ctx, http.MethodPost, "/v1/runs", nil, req, &out); err != nil {
		return nil, nil, err
	}
	return out.Run, out.Invocation, nil
}

// nextStep is the response of the long-poll: one of the four step types,
// flattened, with its type and the cursor.
type nextStep struct {
	Type   string `json:"type"`
	Cursor string `json:"cursor"`
	stepwise.Continuation
	stepwise.HumanInputRequest
	stepwise.Result
	stepwise.Error
}

// pollTimeout is the server-side wait of one long-poll.
const pollTimeout = 30 * time.Second

// NextStep long-polls the server until the run has something new after
// inv's cursor and returns it (see stepwise.Client); it advances inv.
// Cancelling ctx ends the wait.
func (c *Client) NextStep(ctx context.Context, inv *stepwise.Invocation) (stepwise.AgentStep, error) {
	pos := inv.After
	if p, err := stepwise.ParsePosition(inv.Cursor); err == nil && pos.Less(p) {
		pos = p
	}
	cursor := pos.String()
	for {
		q := url.Values{"after": {cursor}, "timeout": {pollTimeout.String()}}
		var out nextStep
		status, err := c.do(ctx, http.MethodGet, "/v1/runs/"+seg(inv.RunID)+"/next", q, nil, &out)
		if err != nil {
			return nil, err
		}
		if status == http.StatusNoContent {
			continue
		}
		pos, err := stepwise.ParsePosition(out.Cursor)
		if err != nil {
			return nil, fmt.Errorf("stepwise client: next step: bad cursor %q", out.Cursor)
		}
		inv.After, inv.Cursor = pos, out.Cursor
		switch out.Type {
		case "continuation":
			v := out.Continuation
			return &v, nil
		case "human_input_request":
			v := out.HumanInputRequest
			return &v, nil
		case "result":
			v := out.Result
			return &v, nil
		case "error":
			v := out.Error
			return &v, nil
		}
		return nil, fmt.Errorf("stepwise client: next step: unknown type %q", out.Type)
	}
}

// ProvideHumanInput answers a pending request of the run.
func (c *Client) ProvideHumanInput(ctx context.Context, inv *stepwise.Invocation, requestID string, response json.RawMessage) error {
	_, err := c.Answer(ctx, inv.RunID, requestID, response)
	return err
}
