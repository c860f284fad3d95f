package server

import (
	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/wire"
)

// The types of the API are package wire's. Sessions, runs and steps use
// the JSON of the steptype types as is (steps in the versioned wire format
// of docs/step_format.md).

// agentWire describes a registered agent.
func agentWire(a *stepwise.Agent) *wire.Agent {
	out := &wire.Agent{Name: a.Name, Description: a.Description, Instructions: a.Instructions, StartStep: a.StartStep, AfterLLM: a.AfterLLM, Tools: []llm.ToolDef{},
		Limits: wire.AgentLimits{MaxSteps: a.Limits.MaxSteps, StepTimeoutMS: a.Limits.StepTimeout.Milliseconds(), RunTimeoutMS: a.Limits.RunTimeout.Milliseconds(),
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
	"metrics", "annotations", "vector", "embedder", "replay", "fingerprint", "progress", "metadata", "created_at")

var stepNestedKeys = map[string]map[string]bool{
	"metrics": keySet("started_at", "finished_at", "duration_us", "first_token_latency_us", "input_tokens", "output_tokens",
		"cached_tokens", "reasoning_tokens", "cost", "model", "provider", "attempt", "cpu_time_ns", "alloc_bytes", "alloc_objects",
		"overlapping_steps"),
	"error":       keySet("message", "cause", "class", "attempt", "recoverable", "code"),
	"annotations": keySet("state", "state_summary", "goal", "goal_summary", "action", "action_summary"),
	"progress":    keySet("fraction", "message"),
}

var toolCallKeys = keySet("id", "name", "arguments")

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
