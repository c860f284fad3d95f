package server

// The OpenAPI operations and schemas of the dashboard endpoints
// (dashboard.go, graph.go, dashboard_sessions.go). apiOps and schemas
// include them once registerDashboardAPI is part of register.

func dashboardOps() []apiOp {
	pName := pathParam("name", "agent name")
	pRepeat := queryParam("repeat", "integer", "visits (and identical actions) within one run that flag a state repeated (stuck); 2..1000, default 3")
	pMaxNodes := queryParam("max_nodes", "integer", "states kept before the rarest are merged per step name; 2..300, default 80")
	pSessions := queryParam("sessions", "integer", "newest sessions of the agent covered; 1..500, default 50")
	return []apiOp{
		{method: "GET", path: "/v1/sessions/{id}/graph", id: "sessionGraph", summary: "Workflow graph of a session: states, actions, loops, layout",
			params: []apiParam{pID, pRepeat, pMaxNodes}, status: 200, resp: "Graph", errors: []int{400, 401, 404}},
		{method: "GET", path: "/v1/agents/{name}/graph", id: "agentGraph", summary: "Workflow graph merged across an agent's newest sessions",
			params: []apiParam{pName, pSessions, pRepeat, pMaxNodes}, status: 200, resp: "Graph", errors: []int{400, 401, 404}},
		{method: "GET", path: "/v1/agents/{name}/overview", id: "agentOverview", summary: "Runs by status, tokens, cost, latency percentiles per step kind, error rate, repeated-step ratio",
			params: []apiParam{pName, pSessions}, status: 200, resp: "AgentOverview", errors: []int{400, 401, 404}},
		{method: "GET", path: "/v1/sessions/{id}/runs", id: "sessionRuns", summary: "Runs of a session, newest first", params: []apiParam{pID, queryParam("limit", "integer", "only the newest this many runs (at most 10000; default all)")}, status: 200, resp: "RunList", errors: read},
		{method: "GET", path: "/v1/dashboard/sessions", id: "dashboardSessions", summary: "Sessions with their latest run's status, for the dashboard's list",
			params: []apiParam{queryParam("agent", "string", "only this agent"), queryParam("q", "string", "substring of id, title or agent"),
				queryParam("status", "string", "comma-separated: queued, running, waiting, completed, failed, cancelled, idle"),
				queryParam("cursor", "string", "next_cursor of the previous page"), queryParam("limit", "integer", "page size, 1..200, default 50")},
			status: 200, resp: "SessionRowPage", errors: []int{400, 401}},
		{method: "GET", path: "/v1/dashboard/steps", id: "dashboardSteps", summary: "Search the content of steps across sessions, filtered and sorted by the server",
			params: []apiParam{queryParam("q", "string", "text in the content, reasoning, tool calls, inputs, outputs, error or metadata (case-insensitive)"),
				queryParam("agent", "string", "only sessions of this agent"), queryParam("kind", "string", "comma-separated step kinds"),
				queryParam("status", "string", "comma-separated step statuses"), queryParam("error_class", "string", "transient or permanent"),
				queryParam("tool", "string", "tool name (a tool step's tool or a call of an llm step)"), queryParam("model", "string", "substring of the model"),
				queryParam("meta", "string", "KEY=VALUE of the step's metadata; repeatable"), queryParam("from", "string", "RFC 3339: committed at or after"),
				queryParam("to", "string", "RFC 3339: committed at or before"), queryParam("min_cost", "number", "at least this cost (USD)"), queryParam("max_cost", "number", "at most this cost (USD)"),
				queryParam("sort", "string", "time (default), cost, duration or tokens"), queryParam("dir", "string", "desc (default) or asc"),
				queryParam("limit", "integer", "page size, 1..200, default 50"), queryParam("offset", "integer", "matches to skip"),
				queryParam("sessions", "integer", "newest sessions searched, 1..2000, default 200")},
			status: 200, resp: "StepHitPage", errors: []int{400, 401}},
	}
}

func dashboardSchemas() obj {
	point := arrayOf(number())
	return obj{
		"Graph": object(false, []string{"sessions", "runs", "steps", "repeated_step_ratio", "width", "height", "nodes", "edges"}, obj{
			"sessions": integer(), "runs": integer(), "steps": integer(),
			"repeated_step_ratio": obj{"type": "number", "minimum": 0, "maximum": 1, "description": "share of steps that revisit a state: (steps − distinct states) / steps"},
			"loops":               integer(), "stuck_nodes": integer(), "merged_states": integer(), "width": number(), "height": number(),
			"nodes": arrayOf(object(false, []string{"id", "name", "kind", "label", "visits", "steps", "x", "y", "w", "h"}, obj{
				"id": str("stable per name and fingerprint"), "name": str("step name"), "kind": str("step kind"), "hop": integer(),
				"label": str("the state: annotated state, tool name, decision choice or kind"), "fingerprint": str(""), "order": integer(),
				"visits": integer(), "runs": integer(), "sessions": integer(), "max_run_visits": integer(), "entries": integer(), "errors": integer(),
				"tokens": integer(), "cost": number(), "duration_ms": integer(),
				"repeated": boolean(), "stuck": boolean(), "loop": boolean(), "other": boolean(),
				"steps": arrayOf(object(false, []string{"session_id", "step_id", "sequence"}, obj{
					"session_id": str(""), "run_id": str(""), "step_id": str(""), "sequence": integer(), "kind": str(""), "status": str("")})),
				"x": number(), "y": number(), "w": number(), "h": number(),
			})),
			"edges": arrayOf(object(false, []string{"id", "from", "to", "direction", "count", "actions", "points"}, obj{
				"id": str(""), "from": str("node id"), "to": str("node id"),
				"direction": obj{"type": "string", "enum": []string{"forward", "backward", "self"}},
				"count":     integer(), "max_run_count": integer(), "loop": boolean(),
				"actions": arrayOf(object(false, []string{"label", "count"}, obj{"label": str(""), "count": integer()})),
				"points":  arrayOf(point),
			})),
		}),
		"AgentOverview": object(false, []string{"agent", "registered", "sessions", "runs", "runs_total", "steps", "latency"}, obj{
			"agent": str(""), "registered": boolean(), "sessions": integer(), "truncated": boolean(),
			"runs": obj{"type": "object", "additionalProperties": integer(), "description": "runs by status"}, "runs_total": integer(),
			"failed_run_rate": number(), "steps": integer(), "input_tokens": integer(), "output_tokens": integer(), "cached_tokens": integer(),
			"cost": number(), "error_steps": integer(), "error_rate": number(), "repeated_step_ratio": number(),
			"graph_nodes": integer(), "loops": integer(), "stuck_nodes": integer(),
			"latency": arrayOf(object(false, []string{"kind", "count"}, obj{"kind": str(""), "count": integer(), "mean_ms": number(),
				"p50_ms": number(), "p90_ms": number(), "p99_ms": number(), "max_ms": number()})),
			"resources": arrayOf(object(false, []string{"kind", "steps"}, obj{"kind": str(""), "steps": integer(), "cpu_ms": number(), "mean_cpu_ms": number(),
				"alloc_bytes": integer(), "alloc_objects": integer(), "overlapped": integer()})),
		}),
		"StepHitPage": object(false, []string{"steps", "total", "scanned_sessions", "scanned_steps"}, obj{
			"steps": arrayOf(object(false, []string{"session_id", "step"}, obj{"session_id": str(""), "session_title": str(""), "agent": str(""), "step": ref("Step")})),
			"total": integer(), "scanned_sessions": integer(), "scanned_steps": integer(), "truncated": boolean()}),
		"RunList":        object(false, []string{"runs"}, obj{"runs": arrayOf(ref("Run"))}),
		"SessionRowPage": object(false, []string{"sessions"}, obj{"sessions": arrayOf(ref("SessionRow")), "next_cursor": str("")}),
		"SessionRow": obj{"allOf": []any{ref("Session"), object(false, []string{"status", "runs", "duration_ms"}, obj{
			"status": str("latest top-level run's status, or idle"), "run_id": str(""), "runs": integer(), "duration_ms": integer()})}},
	}
}
