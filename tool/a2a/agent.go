// Package a2a calls a remote agent over A2A (Agent2Agent, v1.0 JSON-RPC
// binding; v0.3 servers too) as a tool: the call's input is the first
// message of a task on the remote agent, the task's artifacts its result.
// The agent-file loader (internal/agentload) builds one for each remote
// entry of sub_agents; see docs/protocols.md.
//
// A call is safe to repeat: message ids derive from the call's
// IdempotencyKey, so a call made again after a crash sends the same
// message, which a server that deduplicates messages (Stepwise does)
// answers with the task it already started. The remote task's
// input-required state is returned as a *tool.InputNeeded; the call made
// again with the answer sends it as the next message of that task.
package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/tool"
)

// Config configures a remote agent.
type Config struct {
	// URL is the agent's card (a URL whose path ends in .json) or its
	// JSON-RPC endpoint, whose card is then at
	// URL/.well-known/agent-card.json. Required.
	URL string
	// Name is the tool name; default the card's name, which must then be a
	// valid tool name.
	Name string
	// Description is shown to the model; default the card's description.
	Description string
	// Headers are sent with every request, the card's included.
	Headers map[string]string
	// HTTPClient sends the requests; default a client without an overall
	// timeout (streams last as long as the task).
	HTTPClient *http.Client
	// Timeout bounds a request that neither streams nor waits for the task:
	// the card, GetTask, CancelTask, a non-blocking send. Default 30s.
	Timeout time.Duration
	// PollInterval is how often GetTask is called while a task that is not
	// streamed has not settled. Default 500ms.
	PollInterval time.Duration
	// StreamIdle is how long a stream may send nothing (no event, no
	// heartbeat) before the client stops reading it and polls the task
	// with GetTask instead. Default 2m.
	StreamIdle time.Duration
	// CancelCause, when set, is the context cause (errors.Is) meaning that
	// the caller's run was cancelled: a call stopped with it cancels the
	// remote task (CancelTask, best effort). Any other cancellation (a
	// shutdown, a step timeout) leaves the task running, to be found again
	// by the call made after the restart.
	CancelCause error
}

// Agent is a remote agent as a tool.
type Agent struct {
	cfg    Config
	card   *Card
	def    llm.ToolDef
	c      *client
	stream bool
	// asking holds the task id of each call (by idempotency key) whose
	// task asked for input in this process, so that the call made with
	// the answer reads that task instead of sending its first message
	// again (which finds the task only on a server that deduplicates).
	asking sync.Map
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// New reads the agent's card and returns the tool. A card that cannot be
// read, is not an agent card or offers no JSON-RPC interface is an error.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.URL == "" {
		return nil, errors.New("a2a: URL is required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.StreamIdle <= 0 {
		cfg.StreamIdle = 2 * time.Minute
	}
	cu := cardURL(cfg.URL)
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	card, err := fetchCard(cctx, cfg.HTTPClient, cfg.Name, cu, cfg.Headers)
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		if name = card.Name; !toolName.MatchString(name) {
			return nil, fmt.Errorf("agent card %s: its name %q is not a tool name: set name in the agent file", cu, name)
		}
	}
	endpoint, legacy, err := card.endpoint(cu)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", cu, err)
	}
	desc := cfg.Description
	if desc == "" {
		desc = card.Description
	}
	if desc == "" {
		desc = "Delegate a task to the remote agent " + card.Name + "."
	}
	a := &Agent{cfg: cfg, card: card, stream: card.Capabilities.Streaming,
		c: &client{name: name, endpoint: endpoint, legacy: legacy, headers: cfg.Headers, hc: cfg.HTTPClient, timeout: cfg.Timeout, idle: cfg.StreamIdle}}
	a.def = llm.ToolDef{Name: name, Description: desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The task or question for the agent"}},"required":["input"],"additionalProperties":false}`)}
	return a, nil
}

// Card returns the agent's card as read by New.
func (a *Agent) Card() *Card { return a.card }

// Endpoint returns the JSON-RPC endpoint the calls go to.
func (a *Agent) Endpoint() string { return a.c.endpoint }

// Definition returns the tool definition: {"input": string}, like a local
// sub-agent's.
func (a *Agent) Definition() llm.ToolDef { return a.def }

// Output is the structured result of a call (the tool step's outputs).
type Output struct {
	Agent     string `json:"agent"`                // the card's name
	TaskID    string `json:"task_id,omitempty"`    // the remote task
	ContextID string `json:"context_id,omitempty"` // its context
	State     string `json:"state"`                // its final state (v0.3 spelling)
	Text      string `json:"text"`                 // the artifacts' text, else the status message's
}

// Call sends the input as a new task (or finds the task a previous attempt
// started) and follows it until it completes, fails or asks for input.
func (a *Agent) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	var args struct {
		Input string `json:"input"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil || strings.TrimSpace(args.Input) == "" {
		return &tool.Result{Content: `error: calls of a remote agent need {"input": "..."}`, IsError: true}, nil
	}
	key := c.IdempotencyKey
	if key == "" {
		key = c.RunID + "/" + c.ID
	}
	r := &callRun{a: a, key: key}
	if id, ok := a.asking.Load(key); ok && len(c.Answers) > 0 {
		r.taskID = id.(string)
	}
	t, err := r.run(ctx, args.Input, c.Answers)
	if err == nil {
		if normState(t.Status.State) == stateInputRequired && t.ID != "" {
			a.asking.Store(key, t.ID)
		} else {
			a.asking.Delete(key)
		}
	}
	if err != nil {
		if ctx.Err() != nil && a.cfg.CancelCause != nil && errors.Is(context.Cause(ctx), a.cfg.CancelCause) && r.taskID != "" {
			a.cancelTask(ctx, r.taskID)
		}
		return nil, err
	}
	return a.result(t)
}

// cancelTask cancels a remote task, best effort, after the caller's
// context was cancelled.
func (a *Agent) cancelTask(ctx context.Context, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.Timeout)
	defer cancel()
	_, _ = a.c.call(cctx, "CancelTask", map[string]any{"id": id}, true)
}

// result maps a settled task to the call's result.
func (a *Agent) result(t *task) (*tool.Result, error) {
	state := normState(t.Status.State)
	out := Output{Agent: a.card.Name, TaskID: t.ID, ContextID: t.ContextID, State: state}
	var texts []string
	for _, art := range t.Artifacts {
		if s := partsText(art.Parts); s != "" {
			texts = append(texts, s)
		}
	}
	out.Text = strings.Join(texts, "\n")
	if out.Text == "" && t.Status.Message != nil {
		out.Text = partsText(t.Status.Message.Parts)
	}
	switch state {
	case stateInputRequired:
		prompt, schema := promptOf(t.Status.Message)
		if prompt == "" {
			prompt = "The remote agent " + a.def.Name + " needs input."
		}
		return nil, &tool.InputNeeded{Prompt: prompt, Schema: schema,
			Context: map[string]any{"a2a_agent": a.card.Name, "a2a_task_id": t.ID, "a2a_context_id": t.ContextID, "a2a_endpoint": a.c.endpoint}}
	case stateAuthRequired:
		return nil, tool.Permanent(fmt.Errorf("a2a agent %s: task %s needs authentication (auth-required), which Stepwise does not map; give the agent file's headers or token_env", a.def.Name, t.ID))
	}
	b, _ := json.Marshal(out)
	res := &tool.Result{Content: out.Text, Output: b, Metadata: map[string]any{"a2a_task_id": t.ID}}
	if state != stateCompleted {
		res.IsError = true
		res.Content = fmt.Sprintf("error: remote task %s of agent %s is %s", t.ID, a.def.Name, state)
		if out.Text != "" {
			res.Content += ": " + out.Text
		}
	}
	return res, nil
}
