package server

// Component schemas of the OpenAPI document. Engine records (Session, Run,
// Step) are described field by field for the fields clients use; they allow
// additional properties, since the step wire format grows by adding fields.

type obj = map[string]any

func str(desc string) obj  { return obj{"type": "string", "description": desc} }
func integer() obj         { return obj{"type": "integer"} }
func number() obj          { return obj{"type": "number"} }
func boolean() obj         { return obj{"type": "boolean"} }
func arrayOf(item obj) obj { return obj{"type": "array", "items": item} }
func anyJSON(desc string) obj {
	return obj{"description": desc}
}
func timeStr() obj { return obj{"type": "string", "format": "date-time"} }

// object builds a closed object schema (request bodies: unknown fields are
// refused) or an open one (responses).
func object(closed bool, required []string, props obj) obj {
	o := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	if closed {
		o["additionalProperties"] = false
	}
	return o
}

func schemas() obj {
	return obj{
		"Problem": object(false, []string{"type", "title", "status", "code"}, obj{
			"type": str("urn:stepwise:problem:<code>"), "title": str("HTTP status text"), "status": integer(),
			"detail": str("what went wrong, for a human"), "code": str("stable machine-readable code, see docs/http_api.md"),
		}),
		"Agent": object(false, []string{"name", "tools", "start_step", "after_llm", "limits"}, obj{
			"name": str(""), "description": str(""), "instructions": str("system prompt"), "model": str("model name"),
			"tools":      arrayOf(object(false, []string{"name"}, obj{"name": str(""), "description": str(""), "parameters": anyJSON("JSON Schema")})),
			"sub_agents": arrayOf(str("")), "steps": arrayOf(str("custom step name")), "start_step": str(""), "after_llm": str(""),
			"version":   str("content hash of the definition; runs record the one they started with (options.agent_version)"),
			"on_update": obj{"type": "string", "enum": []string{"continue", "restart", "fail"}},
			"approvals": obj{"type": "object", "additionalProperties": str("always or never")},
			"limits": object(false, nil, obj{"max_steps": integer(), "step_timeout_ms": integer(), "run_timeout_ms": integer(),
				"max_parallel_tools": integer(), "max_depth": integer()}),
		}),
		"Health":    object(false, []string{"status"}, obj{"status": str("ok")}),
		"AgentList": object(false, []string{"agents"}, obj{"agents": arrayOf(ref("Agent"))}),
		"Run": object(false, []string{"id", "session_id", "agent", "status"}, obj{
			"id": str(""), "session_id": str(""), "agent": str(""), "parent_run_id": str(""), "parent_step_id": str(""), "hop": integer(),
			"status": obj{"type": "string", "enum": []string{"queued", "running", "waiting", "completed", "failed", "cancelled"}},
			"cursor": str("next graph step"), "state": anyJSON("custom state (JSON object)"), "input": str(""), "output": str(""),
			"error": ref("StepError"), "step_count": integer(), "created_at": timeStr(), "updated_at": timeStr(), "finished_at": timeStr(),
			"options":     obj{"type": "object", "description": "engine-owned per-run options (agent_version, replay source, limits)"},
			"lease_owner": str("the instance executing the run"), "lease_expires": timeStr(),
		}),
		"StepError": object(false, []string{"message"}, obj{"message": str(""), "cause": str(""), "class": str("transient or permanent"),
			"attempt": integer(), "recoverable": boolean(), "code": str("")}),
		"Invocation": object(false, []string{"run_id", "session_id", "cursor"}, obj{"run_id": str(""), "session_id": str(""), "cursor": str("SEQ:IDX")}),
		"RunCreated": object(false, []string{"run", "invocation"}, obj{"run": ref("Run"), "invocation": ref("Invocation")}),
		"InitiateRequest": object(true, []string{"agent"}, obj{"agent": str("registered agent name"), "input": str("the user message"),
			"session_id": str("continue this session (multi-turn)"), "state": anyJSON("initial custom state, a JSON object"), "title": str("title of a new session (default: the start of input)"),
			"continue":    obj{"type": "boolean", "description": "run the agent on session_id as it stands, without a user message (input must be empty): run from here on an edited fork"},
			"metadata":    obj{"type": "object", "description": "metadata of a new session (string values, numbers…); GET /v1/metrics splits by its keys"},
			"breakpoints": ref("Breakpoints")}),
		"Breakpoints": object(true, nil, obj{"before": arrayOf(str("selector: a step name, a kind, a tool name, *, or step:NAME, kind:KIND, tool:NAME")),
			"after": arrayOf(str("selector, as before"))}),
		"BreakpointPause": object(false, []string{"when", "step", "matched", "at"}, obj{"when": obj{"type": "string", "enum": []string{"before", "after"}},
			"step": str("the step paused before or after"), "kind": str("its kind"), "tools": arrayOf(str("the tool calls of a tools step")),
			"matched": str(`the selector that matched, or "step" (stepping)`), "state": anyJSON("the run state at the pause"),
			"at": integer()}),
		"CancelRequest": object(true, nil, obj{"reason": str("")}),
		"NextStep": object(false, []string{"type", "cursor"}, obj{
			"type":   obj{"type": "string", "enum": []string{"continuation", "human_input_request", "result", "error"}},
			"cursor": str("pass as after to the next call"),
			// continuation
			"status": str("run status at that step: running, or waiting at an answered input step"), "current_step": str("graph step the run went to after that step"), "step": ref("Step"),
			"progress":         obj{"type": []string{"number", "null"}, "description": "last progress fraction a step reported, 0..1; null when none is known"},
			"progress_message": str("last progress message a step reported"),
			// human_input_request
			"request_id": str(""), "prompt": str(""), "schema": anyJSON("JSON Schema of the answer"), "context": obj{"type": "object"},
			"approval": ref("ToolCall"), "expires_at": timeStr(), "breakpoint": ref("BreakpointPause"),
			// result
			"value": str("final output"), "metadata": obj{"type": "object"},
			// error
			"message": str(""), "cause": str(""), "retry_count": integer(), "recoverable": boolean(),
		}),
		"ToolCall": object(false, []string{"id", "name"}, obj{"id": str(""), "name": str(""), "arguments": anyJSON("JSON object")}),
		"PendingInput": object(false, []string{"request_id", "run_id", "session_id", "request"}, obj{
			"request_id": str(""), "run_id": str(""), "session_id": str(""),
			"request": object(false, []string{"prompt"}, obj{"prompt": str(""), "schema": anyJSON("JSON Schema of the answer"), "context": obj{"type": "object"},
				"approval": ref("ToolCall"), "expires_at": timeStr(), "on_expire": str(""), "default": anyJSON(""), "breakpoint": ref("BreakpointPause")}),
		}),
		"PendingList":   object(false, []string{"inputs"}, obj{"inputs": arrayOf(ref("PendingInput"))}),
		"AnswerRequest": object(true, []string{"answer"}, obj{"answer": anyJSON(`a string for free text, a value valid under the request's schema, or {"approved": bool, "message"?: string, "always"?: bool} for approvals, or "continue", "step" or {"action"?: "continue"|"step", "state"?: {...}} for a breakpoint's pause`)}),
		"AnswerResult":  object(false, []string{"step"}, obj{"step": ref("Step")}),
		"Session": object(false, []string{"id", "last_sequence"}, obj{
			"id": str(""), "agent": str(""), "title": str(""), "parent_session_id": str(""), "fork_sequence": integer(), "last_sequence": integer(),
			"input_tokens": integer(), "output_tokens": integer(), "cost": number(), "metadata": obj{"type": "object"},
			"created_at": timeStr(), "updated_at": timeStr(),
		}),
		"SessionPage": object(false, []string{"sessions"}, obj{"sessions": arrayOf(ref("Session")), "next_cursor": str("absent on the last page")}),
		"SessionList": object(false, []string{"sessions"}, obj{"sessions": arrayOf(ref("Session"))}),
		"CreateSessionRequest": object(true, nil, obj{"agent": str("agent name (need not be registered)"), "title": str(""),
			"metadata": obj{"type": "object"}}),
		"ForkRequest":   object(true, []string{"sequence"}, obj{"sequence": integer(), "edit": str("replace the content of step sequence in the fork"), "title": str("")}),
		"RetryRequest":  object(true, []string{"sequence"}, obj{"sequence": integer(), "destructive": boolean(), "agent": str("")}),
		"ReplayRequest": object(true, nil, obj{"live_tools": arrayOf(str("")), "all_tools_live": boolean(), "agent": str("")}),
		"Step": object(false, []string{"v", "id", "session_id", "sequence", "kind", "status", "created_at"}, obj{
			"v": integer(), "id": str(""), "session_id": str(""), "run_id": str(""), "sequence": integer(), "parent_id": str(""), "hop": integer(),
			"kind":    obj{"type": "string", "enum": []string{"user", "llm", "tool", "agent", "input", "decision", "custom", "error", "system"}},
			"name":    str("graph step"),
			"status":  obj{"type": "string", "enum": []string{"completed", "failed", "waiting", "expired", "cancelled"}},
			"role":    obj{"type": "string", "enum": []string{"", "system", "user", "assistant", "tool"}},
			"content": str(""), "reasoning": str(""), "tool_calls": arrayOf(ref("ToolCall")), "tool_call_id": str(""), "tool_name": str(""),
			"inputs": anyJSON(""), "outputs": anyJSON(""), "state_patch": anyJSON("JSON merge patch"), "error": ref("StepError"),
			"metrics": obj{"type": "object"}, "annotations": obj{"type": "object"}, "vector": arrayOf(number()), "embedder": str(""),
			"replay": str("reused or live"), "fingerprint": str(""), "metadata": obj{"type": "object"}, "created_at": timeStr(),
			"progress": ref("Progress"),
		}),
		"Progress":       object(false, nil, obj{"fraction": number(), "message": str("")}),
		"StepList":       object(false, []string{"steps"}, obj{"steps": arrayOf(ref("Step"))}),
		"IngestRequest":  object(true, []string{"steps"}, obj{"steps": arrayOf(ref("Step"))}),
		"TruncateResult": object(false, []string{"deleted"}, obj{"deleted": integer()}),
		"Summary": object(false, []string{"session_id", "total_steps"}, obj{
			"session_id": str(""), "total_steps": integer(), "by_kind": obj{"type": "object"}, "by_role": obj{"type": "object"},
			"sequence_range": arrayOf(integer()), "input_tokens": integer(), "output_tokens": integer(), "cached_tokens": integer(),
			"cost": number(), "duration_ms": integer(), "errors": integer(), "runs": obj{"type": "object"}, "forks": integer(),
			"parent_session_id": str(""), "fork_sequence": integer(),
		}),
		"ForkTree": object(false, []string{"session"}, obj{"session": ref("Session"), "forks": arrayOf(ref("ForkTree"))}),
		"ContextPreview": object(false, []string{"messages"}, obj{"model": str(""), "system": str(""),
			"messages": arrayOf(object(false, []string{"role"}, obj{"role": str(""), "content": str(""), "reasoning": str(""),
				"tool_calls": arrayOf(ref("ToolCall")), "tool_call_id": str(""), "tool_name": str("")})),
			"tools": arrayOf(obj{"type": "object"}), "temperature": number(), "max_tokens": integer()}),
		"Event": object(false, []string{"id", "type", "session_id", "run_id", "time"}, obj{
			"id": str("position SEQ:IDX, also the SSE id"),
			"type": obj{"type": "string", "enum": []string{"run_started", "step_started", "step_delta", "step_progress", "step_yield", "step_reset",
				"step_completed", "run_waiting", "run_finished"}},
			"session_id": str(""), "run_id": str(""), "time": timeStr(), "step_name": str(""),
			"delta": object(false, nil, obj{"content": str(""), "reasoning": str(""), "tool_call": object(false, nil, obj{"index": integer(),
				"id": str(""), "name": str(""), "arguments": str("")})}),
			"step": ref("Step"), "run": ref("Run"), "progress": ref("Progress"),
			"yield": object(false, []string{"name"}, obj{"name": str("e.g. validation.checking"), "data": anyJSON("the yielded value")}),
			"reset": object(false, []string{"attempt", "retrying"}, obj{"attempt": integer(), "reason": str(""), "retrying": obj{"type": "boolean"}}),
		}),
		"RunAgentInput": object(false, []string{"threadId", "runId", "messages"}, obj{
			"threadId": str("the session id (created on first use)"), "runId": str("client run id, echoed in events"),
			"protocolVersion": str(""), "parentRunId": str(""), "state": anyJSON("initial state, a JSON object"),
			"messages": arrayOf(obj{"type": "object"}), "tools": arrayOf(obj{"type": "object"}), "context": arrayOf(obj{"type": "object"}),
			"forwardedProps": anyJSON(""),
			"resume": arrayOf(object(false, []string{"interruptId", "status"}, obj{"interruptId": str("input request id"),
				"status": obj{"type": "string", "enum": []string{"resolved", "cancelled"}}, "payload": anyJSON("the answer")})),
		}),
	}
}
