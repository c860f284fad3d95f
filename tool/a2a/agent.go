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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
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

// messageID is the id of message n of the call with key: 0 the input, n
// the n-th answer.
func messageID(key string, n int) string {
	sum := sha256.Sum256([]byte("stepwise-a2a\x00" + key + "\x00" + strconv.Itoa(n)))
	return "sw-" + hex.EncodeToString(sum[:16])
}

// callRun is one call in progress.
type callRun struct {
	a      *Agent
	key    string
	taskID string // once known
}

func (r *callRun) userMessage(n int, parts []part, t *task) *message {
	m := &message{MessageID: r.messageIDOf(n), Role: "ROLE_USER", Parts: parts}
	if t != nil {
		m.TaskID, m.ContextID = t.ID, t.ContextID
	}
	if r.a.c.legacy {
		m.Role, m.Kind = "user", "message"
		for i := range m.Parts {
			if m.Parts[i].Text != nil {
				m.Parts[i].Kind = "text"
			} else {
				m.Parts[i].Kind = "data"
			}
		}
	}
	return m
}

func (r *callRun) messageIDOf(n int) string { return messageID(r.key, n) }

func textPart(s string) part { return part{Text: &s} }

// answerParts is an answer as message parts: a JSON string as text, any
// other value as a data part.
func answerParts(answer json.RawMessage) []part {
	var s string
	if json.Unmarshal(answer, &s) == nil {
		return []part{textPart(s)}
	}
	return []part{{Data: answer, MediaType: "application/json"}}
}

// run sends the input (again, after a crash: the same message) and the
// answers not yet delivered, and follows the task until it settles.
func (r *callRun) run(ctx context.Context, input string, answers []json.RawMessage) (*task, error) {
	first := r.userMessage(0, []part{textPart(input)}, nil)
	if len(answers) == 0 {
		return r.sendFollow(ctx, first)
	}
	// The task asked for input before: read it as it is now (by its id
	// when this process saw it ask, else by sending the input message
	// again without waiting), then send what it lacks.
	var ev *event
	var err error
	if r.taskID != "" {
		ev, err = r.a.c.call(ctx, "GetTask", map[string]any{"id": r.taskID}, true)
	} else {
		ev, err = r.a.c.call(ctx, "SendMessage", r.sendParams(first, false), true)
	}
	if err != nil {
		return nil, err
	}
	t, err := r.taskOf(ev)
	if err != nil || t.ID == "" {
		return t, err
	}
	for i := r.delivered(t, len(answers)); i < len(answers); i++ {
		if normState(t.Status.State) != stateInputRequired {
			break
		}
		if t, err = r.sendFollow(ctx, r.userMessage(i+1, answerParts(answers[i]), t)); err != nil {
			return nil, err
		}
	}
	if !settled(t.Status.State) {
		return r.poll(ctx, t)
	}
	return t, nil
}

// delivered is how many of the answers the task has received: its user
// messages after the first (a server that keeps no history: all but the
// last when it asks for input, else all).
func (r *callRun) delivered(t *task, answers int) int {
	if len(t.History) == 0 {
		if normState(t.Status.State) == stateInputRequired {
			return answers - 1
		}
		return answers
	}
	n := -1
	for _, m := range t.History {
		if isUser(m.Role) {
			n++
		}
	}
	return min(max(n, 0), answers)
}

func (r *callRun) sendParams(m *message, wait bool) map[string]any {
	p := map[string]any{"message": m}
	if !wait {
		if r.a.c.legacy {
			p["configuration"] = map[string]any{"blocking": false}
		} else {
			p["configuration"] = map[string]any{"returnImmediately": true}
		}
	}
	return p
}

// taskOf is the task of a send's result; a message answered with a
// message (no task) is a completed task without an id.
func (r *callRun) taskOf(ev *event) (*task, error) {
	switch {
	case ev.Task != nil:
		r.taskID = ev.Task.ID
		return ev.Task, nil
	case ev.Message != nil:
		return &task{Status: status{State: stateCompleted}, Artifacts: []artifact{{Parts: ev.Message.Parts}}}, nil
	}
	return nil, &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendMessage"), Message: "the result is neither a task nor a message"}
}

// sendFollow sends a message and follows its task until it settles: as a
// stream when the card says the agent streams, else by a blocking send
// and GetTask.
func (r *callRun) sendFollow(ctx context.Context, m *message) (*task, error) {
	answering := m.TaskID != ""
	if !r.a.stream {
		// A new task is sent without waiting, so that its id is known at
		// once (to cancel it); an answer waits, since a task answered
		// without waiting may still show the question.
		ev, err := r.a.c.call(ctx, "SendMessage", r.sendParams(m, answering), false)
		if err != nil {
			return nil, err
		}
		t, err := r.taskOf(ev)
		if err != nil || t.ID == "" || settled(t.Status.State) {
			return t, err
		}
		return r.poll(ctx, t)
	}
	// The stream outlives a cancellation of ctx until it has named the
	// task (at most the request timeout), so that the task can be
	// cancelled too.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	named := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-ctx.Done():
			t := time.NewTimer(r.a.cfg.Timeout)
			defer t.Stop()
			select {
			case <-named:
			case <-t.C:
			case <-sctx.Done():
			}
			stop()
		case <-sctx.Done():
		}
	}()
	var t *task
	var failed error
	// The task a stream starts with, answering a task that asked, may
	// still show the question: it is working on the answer, and only an
	// update (or, if the stream ends first, GetTask) settles it.
	err := r.a.c.stream(sctx, "SendStreamingMessage", r.sendParams(m, true), func(ev *event) bool {
		switch {
		case ev.Task != nil:
			t = ev.Task
			r.taskID = t.ID
			once.Do(func() { close(named) })
			if answering && normState(t.Status.State) == stateInputRequired {
				t.Status = status{State: "working"}
			}
		case ev.Message != nil:
			if t == nil {
				t, failed = r.taskOf(ev)
				return false
			}
		case t == nil:
			failed = &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendStreamingMessage"), Message: "the stream did not start with the task"}
			return false
		case ev.StatusUpdate != nil:
			t.Status = ev.StatusUpdate.Status
		case ev.ArtifactUpdate != nil:
			t.Artifacts = mergeArtifact(t.Artifacts, ev.ArtifactUpdate)
		}
		return t == nil || !settled(t.Status.State)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err == nil {
		err = failed
	}
	if errors.Is(err, errStreamIdle) {
		if t != nil && t.ID != "" {
			return r.poll(ctx, t)
		}
		err = &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendStreamingMessage"), Message: fmt.Sprintf("no event within %v", r.a.cfg.StreamIdle), Transient: true, Err: err}
	}
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendStreamingMessage"), Message: "the stream ended without a task", Transient: true}
	}
	if t.ID != "" && (!settled(t.Status.State) || (normState(t.Status.State) == stateCompleted && len(t.Artifacts) == 0)) {
		// The stream ended early, or the artifacts were not streamed:
		// read the task.
		return r.poll(ctx, t)
	}
	return t, nil
}

func mergeArtifact(arts []artifact, u *artifactUpdate) []artifact {
	for i := range arts {
		if arts[i].ArtifactID == u.Artifact.ArtifactID && u.Artifact.ArtifactID != "" {
			if u.Append {
				arts[i].Parts = append(arts[i].Parts, u.Artifact.Parts...)
			} else {
				arts[i] = u.Artifact
			}
			return arts
		}
	}
	return append(arts, u.Artifact)
}

// poll reads the task with GetTask until it settles.
func (r *callRun) poll(ctx context.Context, t *task) (*task, error) {
	tick := time.NewTicker(r.a.cfg.PollInterval)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick.C:
			}
		}
		ev, err := r.a.c.call(ctx, "GetTask", map[string]any{"id": t.ID}, true)
		if err != nil {
			return nil, err
		}
		if ev.Task == nil {
			return nil, &Error{Agent: r.a.def.Name, Method: r.a.c.method("GetTask"), Message: "the result is not a task"}
		}
		if settled(ev.Task.Status.State) {
			return ev.Task, nil
		}
	}
}
