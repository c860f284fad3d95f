package server

import (
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
)

// The wire types of the API. Sessions, runs, steps, summaries and fork trees
// use the JSON of the stepwise types as is (steps in the versioned wire
// format of docs/step_format.md); what differs from the engine types, or
// exists only on the wire, is declared here.

// agentJSON describes a registered agent.
type agentJSON struct {
	Name         string            `json:"name"`
	Description  string            `json:"description,omitempty"`
	Instructions string            `json:"instructions,omitempty"`
	Model        string            `json:"model,omitempty"`
	Tools        []llm.ToolDef     `json:"tools"`
	SubAgents    []string          `json:"sub_agents,omitempty"`
	Steps        []string          `json:"steps,omitempty"` // custom step names
	StartStep    string            `json:"start_step"`
	AfterLLM     string            `json:"after_llm"`
	Approvals    map[string]string `json:"approvals,omitempty"`
	Limits       limitsJSON        `json:"limits"`
	Version      string            `json:"version,omitempty"`   // content hash of the definition
	OnUpdate     string            `json:"on_update,omitempty"` // what runs of other versions do
}

type limitsJSON struct {
	MaxSteps         int   `json:"max_steps"`
	StepTimeoutMS    int64 `json:"step_timeout_ms"`
	RunTimeoutMS     int64 `json:"run_timeout_ms,omitempty"`
	MaxParallelTools int   `json:"max_parallel_tools"`
	MaxDepth         int   `json:"max_depth"`
}

type agentList struct {
	Agents []*agentJSON `json:"agents"`
}

// initiateRequest is the body of POST /v1/runs.
type initiateRequest struct {
	Agent     string          `json:"agent"`
	Input     string          `json:"input"`
	SessionID string          `json:"session_id,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Title     string          `json:"title,omitempty"`
	Continue  bool            `json:"continue,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

// runCreated answers the endpoints that start a run.
type runCreated struct {
	Run        *stepwise.Run        `json:"run"`
	Invocation *stepwise.Invocation `json:"invocation"`
}

type cancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

type answerRequest struct {
	Answer json.RawMessage `json:"answer"`
}

type answerResult struct {
	Step *stepwise.Step `json:"step"`
}

type pendingList struct {
	Inputs []*stepwise.PendingInput `json:"inputs"`
}

// nextStepJSON is one answer of the next-step long-poll: the fields of the
// step type, its type name, and the cursor to pass as after next time.
type nextStepJSON struct {
	Type   string `json:"type"` // continuation, human_input_request, result, error
	Cursor string `json:"cursor"`
	*stepwise.Continuation
	*stepwise.HumanInputRequest
	*stepwise.Result
	*stepwise.Error
}

type sessionPage struct {
	Sessions   []*stepwise.Session `json:"sessions"`
	NextCursor string              `json:"next_cursor,omitempty"`
}

type sessionList struct {
	Sessions []*stepwise.Session `json:"sessions"`
}

type createSessionRequest struct {
	Agent    string          `json:"agent,omitempty"`
	Title    string          `json:"title,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

type forkRequest struct {
	Sequence int64   `json:"sequence"`
	Edit     *string `json:"edit,omitempty"`
	Title    string  `json:"title,omitempty"`
}

type retryRequest struct {
	Sequence    int64  `json:"sequence"`
	Destructive bool   `json:"destructive,omitempty"`
	Agent       string `json:"agent,omitempty"`
}

type replayRequest struct {
	LiveTools    []string `json:"live_tools,omitempty"`
	AllToolsLive bool     `json:"all_tools_live,omitempty"`
	Agent        string   `json:"agent,omitempty"`
}

type stepList struct {
	Steps []*stepwise.Step `json:"steps"`
}

type ingestRequest struct {
	Steps []json.RawMessage `json:"steps"`
}

type truncateResult struct {
	Deleted int64 `json:"deleted"`
}

// eventJSON is the data of an SSE event; ID repeats the event's id line.
// The server writes it with an eventEncoder (event_json.go), without
// reflection; eventWire and encoding/json are the reference it is tested
// against.
type eventJSON struct {
	ID        string             `json:"id"`
	Type      string             `json:"type"`
	SessionID string             `json:"session_id"`
	RunID     string             `json:"run_id"`
	Time      time.Time          `json:"time"`
	StepName  string             `json:"step_name,omitempty"`
	Delta     *stepwise.Delta    `json:"delta,omitempty"`
	Step      *stepwise.Step     `json:"step,omitempty"`
	Run       *stepwise.Run      `json:"run,omitempty"`
	Progress  *stepwise.Progress `json:"progress,omitempty"`
	Yield     *stepwise.Yield    `json:"yield,omitempty"`
	Reset     *stepwise.Reset    `json:"reset,omitempty"`
}

func eventWire(ev *stepwise.Event) *eventJSON {
	return &eventJSON{ID: ev.Position.String(), Type: string(ev.Type), SessionID: ev.SessionID, RunID: ev.RunID, Time: ev.Time,
		StepName: ev.StepName, Delta: ev.Delta, Step: ev.Step, Run: ev.Run, Progress: ev.Progress, Yield: ev.Yield, Reset: ev.Reset}
}

func agentWire(a *stepwise.Agent) *agentJSON {
	out := &agentJSON{Name: a.Name, Description: a.Description, Instructions: a.Instructions, StartStep: a.StartStep, AfterLLM: a.AfterLLM, Tools: []llm.ToolDef{},
		Limits: limitsJSON{MaxSteps: a.Limits.MaxSteps, StepTimeoutMS: a.Limits.StepTimeout.Milliseconds(), RunTimeoutMS: a.Limits.RunTimeout.Milliseconds(),
			MaxParallelTools: a.Limits.MaxParallelTools, MaxDepth: a.Limits.MaxDepth},
		Version: a.Version, OnUpdate: string(a.OnUpdate)}
	if a.Model != nil {
		out.Model = a.Model.Name()
	}
	for _, t := range a.Tools {
		out.Tools = append(out.Tools, t.Definition())
	}
	for _, sub := range a.SubAgents {
		out.SubAgents = append(out.SubAgents, sub.Name)
	}
	for name := range a.Steps {
		out.Steps = append(out.Steps, name)
	}
	sortStrings(out.Steps)
	if len(a.Approvals) > 0 {
		out.Approvals = map[string]string{}
		for k, v := range a.Approvals {
			out.Approvals[k] = string(v)
		}
	}
	return out
}

// stepWireKeys are the fields of the step wire format, version 1
// (docs/step_format.md); ingest refuses others. A test checks the list
// against steptype's encoder.
var stepWireKeys = keySet("v", "id", "session_id", "run_id", "sequence", "parent_id", "hop", "kind", "name", "status",
	"role", "content", "reasoning", "tool_calls", "tool_call_id", "tool_name", "inputs", "outputs", "state_patch", "error",
	"metrics", "annotations", "vector", "embedder", "replay", "fingerprint", "metadata", "created_at")

var stepNestedKeys = map[string]map[string]bool{
	"metrics": keySet("started_at", "finished_at", "duration_us", "first_token_latency_us", "input_tokens", "output_tokens",
		"cached_tokens", "reasoning_tokens", "cost", "model", "provider", "attempt"),
	"error":       keySet("message", "cause", "class", "attempt", "recoverable", "code"),
	"annotations": keySet("state", "state_summary", "goal", "goal_summary", "action", "action_summary"),
}

var toolCallKeys = keySet("id", "name", "arguments")

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
