package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepwise-run/stepwise/tool"
)

// errElicited ends a tool call whose server asked for an answer Stepwise
// does not have yet: the call is made again once a person has answered.
var errElicited = errors.New("stepwise: mcp: the server asked for input")

// elicitation is the state of the one call in flight on a client with
// Elicitation set: the answers it was given (from earlier requests of the
// same call, answered by a person) and the request that ended it.
type elicitation struct {
	answers []json.RawMessage
	next    int
	asked   *sdk.ElicitParams
	cancel  context.CancelCauseFunc
}

// elicitState guards the call in flight. Calls of a client with
// Elicitation set run one at a time (calls), so that a request from the
// server belongs to exactly one call.
type elicitState struct {
	calls    sync.Mutex
	mu       sync.Mutex
	inflight *elicitation
}

// elicit answers the server's elicitation/create: the next recorded
// answer of the call in flight when it has one, else it records the
// request and cancels the call (the engine parks the run on a person's
// answer and makes the call again).
func (c *Client) elicit(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	c.el.mu.Lock()
	defer c.el.mu.Unlock()
	e := c.el.inflight
	p := req.Params
	switch {
	case e == nil || e.asked != nil:
		// Not during a call (or after its request was taken): nobody can
		// answer.
		return &sdk.ElicitResult{Action: "cancel"}, nil
	case p.Mode == "url":
		return nil, fmt.Errorf("mcp %s: URL elicitation is not supported", c.cfg.Name)
	case e.next < len(e.answers):
		a := e.answers[e.next]
		e.next++
		var content map[string]any
		if err := json.Unmarshal(a, &content); err != nil {
			// An answer that is no object (no schema was given): the
			// value under "value".
			var v any
			_ = json.Unmarshal(a, &v)
			content = map[string]any{"value": v}
		}
		return &sdk.ElicitResult{Action: "accept", Content: content}, nil
	}
	e.asked = p
	e.cancel(errElicited)
	return &sdk.ElicitResult{Action: "cancel"}, nil
}

// callElicitable makes one call with elicitation: answers are those of the
// earlier requests of this call. A request without an answer yet ends the
// call with tool.InputNeeded.
func (t *mcpTool) callElicitable(ctx context.Context, s *sdk.ClientSession, params *sdk.CallToolParams, answers []json.RawMessage) (*tool.Result, error) {
	c := t.client
	c.el.calls.Lock()
	defer c.el.calls.Unlock()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e := &elicitation{answers: answers, cancel: cancel}
	c.el.mu.Lock()
	c.el.inflight = e
	c.el.mu.Unlock()
	res, err := s.CallTool(cctx, params)
	c.el.mu.Lock()
	c.el.inflight = nil
	asked := e.asked
	c.el.mu.Unlock()
	if asked != nil {
		// Whatever the server did after the cancel, the call ends here and
		// is made again with the answer.
		return nil, t.inputNeeded(asked, len(answers))
	}
	if err != nil {
		return t.callError(ctx, s, err)
	}
	return convertResult(res)
}

// inputNeeded is the person's request for an elicitation: its message, its
// schema, and which server and tool ask.
func (t *mcpTool) inputNeeded(p *sdk.ElicitParams, n int) error {
	need := &tool.InputNeeded{Prompt: p.Message, Context: map[string]any{
		"mcp_server": t.client.cfg.Name, "mcp_tool": t.remote, "mcp_elicitation": n + 1,
	}}
	if p.RequestedSchema != nil {
		b, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return tool.Permanent(fmt.Errorf("mcp %s: call %s: elicitation schema: %w", t.client.cfg.Name, t.remote, err))
		}
		need.Schema = b
	}
	return need
}
