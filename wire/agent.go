package wire

import "github.com/stepwise-run/stepwise/llm"

// Agent describes a registered agent (GET /v1/agents/{name}).
type Agent struct {
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
	Limits       AgentLimits       `json:"limits"`
	Version      string            `json:"version,omitempty"`   // content hash of the definition
	OnUpdate     string            `json:"on_update,omitempty"` // what runs of other versions do
}

// AgentLimits are an agent's run limits.
type AgentLimits struct {
	MaxSteps         int   `json:"max_steps"`
	StepTimeoutMS    int64 `json:"step_timeout_ms"`
	RunTimeoutMS     int64 `json:"run_timeout_ms,omitempty"`
	MaxParallelTools int   `json:"max_parallel_tools"`
	MaxDepth         int   `json:"max_depth"`
}

// AgentList is the body of GET /v1/agents.
type AgentList struct {
	Agents []*Agent `json:"agents"`
}

// ModelRequest is the body of GET /v1/sessions/{id}/context: the exact
// model request the next llm step of the session would send.
type ModelRequest = llm.Request
