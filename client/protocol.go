package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// Initiate starts a run of agent with input on the server, where the
// background executor runs it, and returns its invocation. Options set the
// session (wire.InSession, which stepwise.InSession returns too) and the
// new session's metadata (wire.WithMetadata); a replay is started with
// Replay instead.
func (c *Client) Initiate(ctx context.Context, agent, input string, opts ...wire.InitiateOption) (*wire.Invocation, error) {
	_, inv, err := c.StartRun(ctx, agent, input, opts...)
	return inv, err
}

// StartRun is Initiate returning the created run as well.
func (c *Client) StartRun(ctx context.Context, agent, input string, opts ...wire.InitiateOption) (*steptype.Run, *wire.Invocation, error) {
	req := wire.InitiateRequest{Agent: agent, Input: input}
	for _, o := range opts {
		o(&req)
	}
	var out wire.RunCreated
	if _, err := c.do(ctx, http.MethodPost, "/v1/runs", nil, req, &out); err != nil {
		return nil, nil, err
	}
	return out.Run, out.Invocation, nil
}

// pollTimeout is the server-side wait of one long-poll.
const pollTimeout = 30 * time.Second

// NextStep long-polls the server until the run has something new after
// inv's cursor and returns it (see stepwise.Client); it advances inv.
// Cancelling ctx ends the wait.
func (c *Client) NextStep(ctx context.Context, inv *wire.Invocation) (wire.AgentStep, error) {
	pos := inv.After
	if p, err := wire.ParsePosition(inv.Cursor); err == nil && pos.Less(p) {
		pos = p
	}
	cursor := pos.String()
	for {
		q := url.Values{"after": {cursor}, "timeout": {pollTimeout.String()}}
		var out wire.NextStep
		status, err := c.do(ctx, http.MethodGet, "/v1/runs/"+seg(inv.RunID)+"/next", q, nil, &out)
		if err != nil {
			return nil, err
		}
		if status == http.StatusNoContent {
			continue
		}
		pos, err := wire.ParsePosition(out.Cursor)
		if err != nil {
			return nil, fmt.Errorf("stepwise client: next step: bad cursor %q", out.Cursor)
		}
		inv.After, inv.Cursor = pos, out.Cursor
		if step := out.Step(); step != nil {
			return step, nil
		}
		return nil, fmt.Errorf("stepwise client: next step: unknown type %q", out.Type)
	}
}

// ProvideHumanInput answers a pending request of the run.
func (c *Client) ProvideHumanInput(ctx context.Context, inv *wire.Invocation, requestID string, response json.RawMessage) error {
	_, err := c.Answer(ctx, inv.RunID, requestID, response)
	return err
}
