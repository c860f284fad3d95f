package wire

import (
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// The worker protocol (docs/workers.md): a process in any language serves
// some of an agent's custom steps and tools. It registers what it serves,
// long-polls for tasks, and reports on each task it holds under a lease
// whose fencing token every later call carries.

// Task kinds.
const (
	TaskKindStep = "step" // a custom step of the agent's graph
	TaskKindTool = "tool" // one tool call of a tools step
)

// Task states.
const (
	TaskQueued    = "queued"    // offered to the agent's workers
	TaskClaimed   = "claimed"   // leased to one worker
	TaskCompleted = "completed" // its result is recorded
	TaskFailed    = "failed"    // its error is recorded
	TaskParked    = "parked"    // it asked for human input; the answer makes a new task
)

// Transient and permanent error classes of a TaskFail.
const (
	ErrorTransient = string(steptype.ErrorTransient)
	ErrorPermanent = string(steptype.ErrorPermanent)
)

// Problem codes of the worker endpoints.
const (
	CodeTaskNotFound      = "task_not_found"      // 404: no task of that id
	CodeLeaseLost         = "lease_lost"          // 409: the token is not the task's current one (another claim fenced it)
	CodeTaskFinished      = "task_finished"       // 409: the task already has its result
	CodeInvalidResult     = "invalid_result"      // 422: output violates the tool's output schema, unknown next step, bad state patch
	CodeInvalidDefinition = "invalid_definition"  // 422: the agent definition does not parse or is refused
	CodeNotServed         = "agent_not_served"    // 404: a poll names an agent this instance has no worker registration of
	CodeDefinitionChanged = "definition_conflict" // 409: two workers registered different definitions of one agent at once
)

// WorkerRegister is the body of POST /v1/workers/register.
type WorkerRegister struct {
	// WorkerID names the worker process (1-128 of letters, digits, "_.:-").
	// It is the lease owner of the tasks it claims and shows on their steps.
	WorkerID string         `json:"worker_id"`
	Agents   []*WorkerAgent `json:"agents"`
}

// WorkerAgent is one agent a worker registers: its definition, which is
// an agent file (docs/agent_file.md) as a JSON object, and the handlers
// the worker implements.
type WorkerAgent struct {
	Definition json.RawMessage `json:"definition"`
	// Steps are the custom steps the worker serves, by name.
	Steps []*WorkerStep `json:"steps,omitempty"`
	// Tools are the tools the worker serves; the model sees them like
	// any other tool of the agent.
	Tools []*WorkerTool `json:"tools,omitempty"`
}

// WorkerStep declares a custom step served by workers.
type WorkerStep struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Next lists the steps this step may route to (informational, for the
	// graph); any step of the agent is accepted at completion.
	Next []string `json:"next,omitempty"`
	// Messages, when set, puts the run's model context (the messages the
	// next model call would see) in each task of this step.
	Messages bool `json:"messages,omitempty"`
}

// WorkerTool declares a tool served by workers.
type WorkerTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`    // JSON Schema of the arguments; default any object
	Output      json.RawMessage `json:"output_schema,omitempty"` // JSON Schema a result's output must satisfy
}

// WorkerRegistered is the response of POST /v1/workers/register.
type WorkerRegistered struct {
	WorkerID string              `json:"worker_id"`
	Agents   []*RegisteredAgent  `json:"agents"`
	Limits   WorkerProtocolLimit `json:"limits"`
}

// RegisteredAgent reports the version a registration resolved to.
type RegisteredAgent struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Changed is set when the definition differed from the one the server
	// had: a new version, and the agent's on_update applies to its
	// unfinished runs.
	Changed bool `json:"changed"`
}

// WorkerProtocolLimit are the server's numbers a worker works with.
type WorkerProtocolLimit struct {
	LeaseMS        int64 `json:"lease_ms"`         // a claim's lease; renewed by heartbeats and events
	HeartbeatMS    int64 `json:"heartbeat_ms"`     // the interval a worker should heartbeat at (lease/3)
	MaxPollMS      int64 `json:"max_poll_ms"`      // the longest a poll is held
	MaxTasks       int   `json:"max_tasks"`        // the most tasks one poll returns
	MaxBodyBytes   int64 `json:"max_body_bytes"`   // the largest request body
	MaxEventsBatch int   `json:"max_events_batch"` // the most events one report carries
}

// TaskPoll is the body of POST /v1/workers/poll.
type TaskPoll struct {
	WorkerID string   `json:"worker_id"`
	Agents   []string `json:"agents"`             // agents whose tasks to take (registered on this server)
	Max      int      `json:"max,omitempty"`      // tasks to claim at most; default 1
	WaitMS   int64    `json:"wait_ms,omitempty"`  // hold the request this long while nothing is offered; default 30000
	Handlers []string `json:"handlers,omitempty"` // only tasks of these step or tool names; default all the worker's
}

// TaskBatch is the response of a poll that claimed tasks.
type TaskBatch struct {
	Tasks []*Task `json:"tasks"`
}

// Task is a unit of work offered to a worker, claimed under a lease.
type Task struct {
	ID             string    `json:"id"`
	Token          int64     `json:"token"` // fencing token: carried by every call about the task
	Kind           string    `json:"kind"`  // "step" or "tool"
	Name           string    `json:"name"`  // the step or tool name
	Agent          string    `json:"agent"`
	AgentVersion   string    `json:"agent_version,omitempty"`
	SessionID      string    `json:"session_id"`
	RunID          string    `json:"run_id"`
	StepID         string    `json:"step_id,omitempty"` // the id the step will be committed with (step tasks)
	IdempotencyKey string    `json:"idempotency_key"`   // stable across re-executions after a crash
	Attempt        int       `json:"attempt"`           // the engine's attempt under the retry policy, 1-based
	Claims         int       `json:"claims"`            // how many times the task was claimed, this one included
	LeaseExpires   time.Time `json:"lease_expires"`
	Input          TaskInput `json:"input"`
}

// TaskInput is what the handler works on.
type TaskInput struct {
	// Arguments are a tool call's arguments (tool tasks).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ToolCallID is the model's id of the call (tool tasks).
	ToolCallID string `json:"tool_call_id,omitempty"`
	// State is the run's custom state snapshot (a JSON object).
	State json.RawMessage `json:"state,omitempty"`
	// RunInput is the user message of the run.
	RunInput string `json:"run_input,omitempty"`
	// Answer, for a step re-offered after its human-input request was
	// answered, is the answer (JSON) and Request the request it answers.
	// For a tool call made again after its requests were answered, Answer
	// is the latest answer and Answers all of them, oldest first.
	Answer    json.RawMessage   `json:"answer,omitempty"`
	Answers   []json.RawMessage `json:"answers,omitempty"`
	Request   *InputRequest     `json:"request,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
	// Messages is the model context, for steps registered with messages.
	Messages []llm.Message `json:"messages,omitempty"`
}

// TaskToken is the body of heartbeat and release calls.
type TaskToken struct {
	Token  int64  `json:"token"`
	Reason string `json:"reason,omitempty"` // release: why, for the log
}

// TaskLease is the response of a heartbeat or an event report.
type TaskLease struct {
	LeaseExpires time.Time `json:"lease_expires"`
	// Cancel is set when the task's run finished (cancelled) or no longer
	// needs the task: stop working on it; a completion would be refused.
	Cancel bool `json:"cancel"`
}

// TaskEvents is the body of POST /v1/workers/tasks/{id}/events.
type TaskEvents struct {
	Token  int64        `json:"token"`
	Events []*TaskEvent `json:"events"`
}

// TaskEvent is one report of a running task.
type TaskEvent struct {
	// Type is "delta" (Text), "yield" (Name, Data), "progress" (Fraction,
	// Message) or "event" (Name, Data: an event inside the step).
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Name     string          `json:"name,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Fraction *float64        `json:"fraction,omitempty"`
	Message  string          `json:"message,omitempty"`
}

// TaskEvent types.
const (
	TaskEventDelta    = "delta"
	TaskEventYield    = "yield"
	TaskEventProgress = "progress"
	TaskEventEvent    = "event"
)

// TaskComplete is the body of POST /v1/workers/tasks/{id}/complete.
type TaskComplete struct {
	Token int64 `json:"token"`
	// Content is the step's text (a tool: what the model sees; default the
	// output as JSON).
	Content string `json:"content,omitempty"`
	// Output is the step's outputs (any JSON); a tool's is checked against
	// its output_schema.
	Output json.RawMessage `json:"output,omitempty"`
	// State is an update of the run's custom state (a JSON object),
	// combined key by key by the agent's reducers, else merged (RFC 7386).
	State json.RawMessage `json:"state,omitempty"`
	// Next is the step to go to (step tasks; required there): a step of
	// the agent, "llm", "tools" or "end".
	Next string `json:"next,omitempty"`
	// IsError marks a tool result that reports a failure to the model.
	IsError bool `json:"is_error,omitempty"`
	// Decision records the step as a routing decision.
	Decision *TaskDecision `json:"decision,omitempty"`
	// Annotations are the step's state/goal/action.
	Annotations *steptype.Annotations `json:"annotations,omitempty"`
	// Usage are model calls the handler made itself (tokens, priced by
	// the server's price table); CostUSD adds a cost of its own.
	Usage   []*TaskUsage `json:"usage,omitempty"`
	CostUSD float64      `json:"cost_usd,omitempty"`
	// Attachments are files the task produced (tool tasks).
	Attachments []*TaskAttachment `json:"attachments,omitempty"`
}

// TaskDecision is a routing choice of a step.
type TaskDecision struct {
	Purpose string   `json:"purpose,omitempty"`
	Options []string `json:"options,omitempty"`
	Choice  string   `json:"choice"`
}

// TaskUsage is the token usage of one model call a handler made.
type TaskUsage struct {
	Model string `json:"model"` // e.g. "openai:gpt-4o-mini"
	llm.Usage
}

// TaskAttachment is a file a task produced; Data is base64 in JSON.
type TaskAttachment struct {
	Name        string `json:"name,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Kind        string `json:"kind,omitempty"` // screenshot, image or file
	Data        []byte `json:"data"`
}

// TaskFail is the body of POST /v1/workers/tasks/{id}/fail.
type TaskFail struct {
	Token   int64  `json:"token"`
	Message string `json:"message"`
	// Class is "transient" (retried under the agent's retry policy) or
	// "permanent" (the default: the step fails; a tool's error goes to the model).
	Class string `json:"class,omitempty"`
	Code  string `json:"code,omitempty"`
}

// TaskInputRequest is the body of POST /v1/workers/tasks/{id}/input: the
// step parks with a human-input request; the answer re-offers the step as
// a new task carrying it.
type TaskInputRequest struct {
	Token   int64           `json:"token"`
	Request *InputRequest   `json:"request"`
	State   json.RawMessage `json:"state,omitempty"`   // a state update committed with the request
	Content string          `json:"content,omitempty"` // text of the step that asks
}

// TaskRelease is the body of POST /v1/workers/release: a worker stopping
// gracefully hands back every task it holds.
type TaskRelease struct {
	WorkerID string `json:"worker_id"`
}

// TaskReleased is the response of a release.
type TaskReleased struct {
	Released int `json:"released"`
}

// TaskResult is the response of complete, fail and input: the task as
// recorded.
type TaskResult struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Duplicate is set when the same token had already finished the task:
	// the call changed nothing (a retried request).
	Duplicate bool `json:"duplicate"`
}

// WorkerList is the body of GET /v1/workers: the workers this server
// process has seen since it started (Since), and what each did through
// it. Counters are per process: with several servers on one database,
// each reports the calls it served.
type WorkerList struct {
	Since   time.Time      `json:"since"`
	Workers []*WorkerStats `json:"workers"`
}

// WorkerStats is one worker's activity through a server process.
type WorkerStats struct {
	ID        string    `json:"id"`
	Agents    []string  `json:"agents"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"` // its latest call of any kind
	Polling   int       `json:"polling"`   // polls of it held now
	Holding   int       `json:"holding"`   // tasks handed to it and not finished, released or lost
	Claimed   int64     `json:"claimed"`   // tasks handed to it
	Completed int64     `json:"completed"`
	Failed    int64     `json:"failed"`
	Parked    int64     `json:"parked"`     // finished with a human-input request
	Released  int64     `json:"released"`   // handed back (graceful stop, or one task)
	LeaseLost int64     `json:"lease_lost"` // calls refused because its lease had passed
	// TaskP50MS and TaskP95MS are the time from a task's hand-over to its
	// finish, over its last TaskSamples tasks (at most 512).
	TaskP50MS   float64 `json:"task_p50_ms"`
	TaskP95MS   float64 `json:"task_p95_ms"`
	TaskSamples int     `json:"task_samples"`
}
