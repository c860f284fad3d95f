package server

// The worker protocol's part of the OpenAPI document (docs/workers.md).

var workerErrors = []int{400, 401, 404, 409, 413, 415, 422, 503}

func workerOps() []apiOp {
	pTask := pathParam("id", "the task id")
	return []apiOp{
		{method: "POST", path: "/v1/workers/register", id: "workerRegister", summary: "Register a worker's agents and handlers (idempotent; a changed definition is a new agent version)",
			body: "WorkerRegister", status: 200, resp: "WorkerRegistered", errors: []int{400, 401, 409, 413, 415, 422, 503}},
		{method: "POST", path: "/v1/workers/poll", id: "workerPoll", summary: "Long-poll for tasks of the named agents: held until one is queued or wait_ms (204: none, poll again); claims under a lease with a new fencing token",
			body: "TaskPoll", status: 200, resp: "TaskBatch", errors: []int{400, 401, 404, 413, 415, 503}},
		{method: "GET", path: "/v1/workers", id: "listWorkers", summary: "The workers this server process has seen since it started, and what each did through it: tasks claimed, completed, failed, parked, released, leases lost, task time p50/p95",
			status: 200, resp: "WorkerList", errors: []int{401, 404, 503}},
		{method: "POST", path: "/v1/workers/release", id: "workerRelease", summary: "Hand back every task the worker holds (graceful stop)",
			body: "TaskRelease", status: 200, resp: "TaskReleased", errors: []int{400, 401, 413, 415, 503}},
		{method: "POST", path: "/v1/workers/tasks/{id}/heartbeat", id: "taskHeartbeat", summary: "Renew a task's lease (409 lease_lost: the token is not current)",
			params: []apiParam{pTask}, body: "TaskToken", status: 200, resp: "TaskLease", errors: workerErrors},
		{method: "POST", path: "/v1/workers/tasks/{id}/events", id: "taskEvents", summary: "Report deltas, yields, progress and events of a running task; renews the lease",
			params: []apiParam{pTask}, body: "TaskEvents", status: 200, resp: "TaskLease", errors: workerErrors},
		{method: "POST", path: "/v1/workers/tasks/{id}/complete", id: "taskComplete", summary: "Complete a task with its result (409 lease_lost or task_finished; 422 invalid_result)",
			params: []apiParam{pTask}, body: "TaskComplete", status: 200, resp: "TaskResult", errors: workerErrors},
		{method: "POST", path: "/v1/workers/tasks/{id}/fail", id: "taskFail", summary: "Fail a task (transient: retried under the agent's retry policy)",
			params: []apiParam{pTask}, body: "TaskFail", status: 200, resp: "TaskResult", errors: workerErrors},
		{method: "POST", path: "/v1/workers/tasks/{id}/input", id: "taskInput", summary: "Park the step or tool call with a human-input request; the answer re-offers it with the answer",
			params: []apiParam{pTask}, body: "TaskInputRequest", status: 200, resp: "TaskResult", errors: workerErrors},
		{method: "POST", path: "/v1/workers/tasks/{id}/release", id: "taskRelease", summary: "Hand one task back at once",
			params: []apiParam{pTask}, body: "TaskToken", status: 200, resp: "TaskResult", errors: workerErrors},
	}
}

func workerSchemas() obj {
	token := obj{"type": "integer", "description": "the claim's fencing token"}
	schema := func(d string) obj { return obj{"type": "object", "description": "JSON Schema " + d} }
	usage := obj{"model": str("e.g. openai:gpt-4o-mini"), "input_tokens": integer(), "output_tokens": integer(),
		"cached_tokens": integer(), "reasoning_tokens": integer()}
	return obj{
		"WorkerRegister": object(true, []string{"worker_id", "agents"}, obj{
			"worker_id": str("1-128 of letters, digits, _ . : -"),
			"agents":    arrayOf(ref("WorkerAgent")),
		}),
		"WorkerAgent": object(true, []string{"definition"}, obj{
			"definition": obj{"type": "object", "description": "an agent file (docs/agent_file.md) as JSON"},
			"steps": arrayOf(object(true, []string{"name"}, obj{"name": str("custom step name"), "description": str(""),
				"next": arrayOf(str("")), "messages": obj{"type": "boolean", "description": "put the model context in each task"}})),
			"tools": arrayOf(object(true, []string{"name"}, obj{"name": str(""), "description": str(""),
				"parameters": schema("of the arguments"), "output_schema": schema("a result's output must satisfy")})),
		}),
		"WorkerRegistered": object(false, []string{"worker_id", "agents", "limits"}, obj{
			"worker_id": str(""),
			"agents":    arrayOf(object(false, []string{"name", "version", "changed"}, obj{"name": str(""), "version": str(""), "changed": boolean()})),
			"limits": object(false, nil, obj{"lease_ms": integer(), "heartbeat_ms": integer(), "max_poll_ms": integer(),
				"max_tasks": integer(), "max_body_bytes": integer(), "max_events_batch": integer()}),
		}),
		"TaskPoll": object(true, []string{"worker_id", "agents"}, obj{
			"worker_id": str(""), "agents": arrayOf(str("")), "max": integer(), "wait_ms": integer(), "handlers": arrayOf(str("")),
		}),
		"TaskBatch": object(false, []string{"tasks"}, obj{"tasks": arrayOf(ref("Task"))}),
		"Task": object(false, []string{"id", "token", "kind", "name", "agent", "session_id", "run_id", "idempotency_key", "input"}, obj{
			"id": str(""), "token": token, "kind": obj{"type": "string", "enum": []string{"step", "tool"}}, "name": str(""),
			"agent": str(""), "agent_version": str(""), "session_id": str(""), "run_id": str(""), "step_id": str(""),
			"idempotency_key": str("stable across re-executions"), "attempt": integer(), "claims": integer(), "lease_expires": timeStr(),
			"input": object(false, nil, obj{"arguments": anyJSON("tool arguments"), "tool_call_id": str(""), "state": anyJSON("run state"),
				"run_input": str(""), "answer": anyJSON("the human answer"), "answers": arrayOf(anyJSON("a tool call's answers so far, oldest first")), "request": ref("InputRequest"), "request_id": str(""),
				"messages": arrayOf(obj{"type": "object"})}),
		}),
		"InputRequest": object(true, []string{"prompt"}, obj{"prompt": str(""), "schema": anyJSON("JSON Schema of the answer"),
			"context": obj{"type": "object"}, "approval": ref("ToolCall"), "expires_at": timeStr(), "on_expire": str("fail or default"), "default": anyJSON(""),
			"breakpoint": ref("BreakpointPause")}),
		"TaskToken": object(true, []string{"token"}, obj{"token": token, "reason": str("")}),
		"TaskLease": object(false, []string{"lease_expires", "cancel"}, obj{"lease_expires": timeStr(), "cancel": boolean()}),
		"TaskEvents": object(true, []string{"token", "events"}, obj{"token": token, "events": arrayOf(object(true, []string{"type"}, obj{
			"type": obj{"type": "string", "enum": []string{"delta", "yield", "progress", "event"}}, "text": str(""), "name": str(""),
			"data": anyJSON(""), "fraction": number(), "message": str("")}))}),
		"TaskComplete": object(true, []string{"token"}, obj{
			"token": token, "content": str(""), "output": anyJSON("any JSON"), "state": anyJSON("state update, a JSON object"),
			"next": str("next step (step tasks)"), "is_error": boolean(),
			"decision":    object(true, []string{"choice"}, obj{"purpose": str(""), "options": arrayOf(str("")), "choice": str("")}),
			"annotations": obj{"type": "object"}, "usage": arrayOf(object(true, []string{"model"}, usage)), "cost_usd": number(),
			"attachments": arrayOf(object(true, []string{"data"}, obj{"name": str(""), "content_type": str(""), "kind": str(""), "data": str("base64")})),
		}),
		"TaskFail": object(true, []string{"token", "message"}, obj{"token": token, "message": str(""),
			"class": obj{"type": "string", "enum": []string{"transient", "permanent"}}, "code": str("")}),
		"TaskInputRequest": object(true, []string{"token", "request"}, obj{"token": token, "request": ref("InputRequest"),
			"state": anyJSON("state update committed with the request"), "content": str("")}),
		"TaskRelease":  object(true, []string{"worker_id"}, obj{"worker_id": str("")}),
		"TaskReleased": object(false, []string{"released"}, obj{"released": integer()}),
		"WorkerList":   object(false, []string{"since", "workers"}, obj{"since": timeStr(), "workers": arrayOf(ref("WorkerStats"))}),
		"WorkerStats": object(false, []string{"id", "agents", "first_seen", "last_seen", "polling", "holding", "claimed", "completed", "failed",
			"parked", "released", "lease_lost", "task_p50_ms", "task_p95_ms", "task_samples"}, obj{
			"id": str("the worker id"), "agents": arrayOf(str("")), "first_seen": timeStr(), "last_seen": timeStr(),
			"polling": integer(), "holding": integer(), "claimed": integer(), "completed": integer(), "failed": integer(),
			"parked": integer(), "released": integer(), "lease_lost": integer(),
			"task_p50_ms": number(), "task_p95_ms": number(), "task_samples": integer()}),
		"TaskResult": object(false, []string{"id", "state", "duplicate"}, obj{"id": str(""), "state": str(""), "duplicate": boolean()}),
	}
}
