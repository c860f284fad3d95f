package server

import (
	"encoding/json"
	"net/http"
	"sync"
)

// The OpenAPI 3.1 description of the API, served at /v1/openapi.json. It
// is written out here, apart from the route table (routes.go); a test checks
// that both list the same operations.

// apiOp is one documented operation.
type apiOp struct {
	method, path, id, summary string
	params                    []apiParam
	body                      string // component schema of the JSON body; "" for none
	bodyOptional              bool
	status                    int    // success status
	resp                      string // component schema of the success body; "" for none
	stream                    bool   // text/event-stream response
	otlp                      string // OTLP body schema: protobuf or JSON, errors as google.rpc.Status
	form                      bool   // a multipart/form-data body (LangSmith's multipart ingest)
	errors                    []int
	detailErrors              []int // errors answered as LangSmith's {"detail": …} bodies
}

type apiParam struct {
	name, in, typ, desc string
	required            bool
}

func pathParam(name, desc string) apiParam {
	return apiParam{name: name, in: "path", typ: "string", desc: desc, required: true}
}
func queryParam(name, typ, desc string) apiParam {
	return apiParam{name: name, in: "query", typ: typ, desc: desc}
}

var (
	pID     = pathParam("id", "the session or run id")
	pAfter  = queryParam("after", "string", "resume after this position, SEQ:IDX (an event id)")
	pLastID = apiParam{name: "Last-Event-ID", in: "header", typ: "string", desc: "resume after this event id (SEQ:IDX); wins over after"}
	read    = []int{401, 404, 503}
	write   = []int{400, 401, 404, 409, 413, 415, 422, 503}
	opsOnce sync.Once
	opsDoc  []byte
)

func apiOps() []apiOp {
	return []apiOp{
		{method: "GET", path: "/v1/openapi.json", id: "getOpenAPI", summary: "This OpenAPI document", status: 200, resp: "", errors: []int{401}},
		{method: "GET", path: "/v1/health", id: "getHealth", summary: "Whether the store can take writes (503 storage_unavailable says why not: a SQLite file deleted under the server, a database that does not answer)", status: 200, resp: "Health", errors: []int{401, 503}},
		{method: "GET", path: "/v1/agents", id: "listAgents", summary: "List the registered agents", status: 200, resp: "AgentList", errors: []int{401}},
		{method: "GET", path: "/v1/agents/{name}", id: "getAgent", summary: "Get an agent", params: []apiParam{pathParam("name", "agent name")}, status: 200, resp: "Agent", errors: read},
		{method: "POST", path: "/v1/runs", id: "initiate", summary: "Start a run (queued, executed in the background)", body: "InitiateRequest", status: 201, resp: "RunCreated", errors: write},
		{method: "GET", path: "/v1/runs/{id}", id: "getRun", summary: "Get a run", params: []apiParam{pID}, status: 200, resp: "Run", errors: read},
		{method: "POST", path: "/v1/runs/{id}/cancel", id: "cancelRun", summary: "Cancel an unfinished run", params: []apiParam{pID}, body: "CancelRequest", bodyOptional: true, status: 200, resp: "Run", errors: write},
		{method: "GET", path: "/v1/runs/{id}/next", id: "nextStep", summary: "Long-poll the next step of a run after the cursor, each once, in order (204: nothing before the timeout, poll again; 409 run_finished: the result was already delivered)",
			params: []apiParam{pID, pAfter, queryParam("timeout", "string", "Go duration, default 30s, at most 120s")}, status: 200, resp: "NextStep", errors: []int{400, 401, 404, 409}},
		{method: "GET", path: "/v1/runs/{id}/events", id: "runEvents", summary: "SSE stream of a run's events; ends after run_finished", params: []apiParam{pID, pAfter, pLastID}, status: 200, stream: true, errors: []int{400, 401, 404}},
		{method: "GET", path: "/v1/runs/{id}/inputs", id: "runInputs", summary: "Pending input requests of a run", params: []apiParam{pID}, status: 200, resp: "PendingList", errors: read},
		{method: "POST", path: "/v1/runs/{id}/inputs/{request_id}", id: "answer", summary: "Answer an input request (409: already answered, 422: invalid answer)",
			params: []apiParam{pID, pathParam("request_id", "input request id")}, body: "AnswerRequest", status: 200, resp: "AnswerResult", errors: write},
		{method: "GET", path: "/v1/inputs", id: "allInputs", summary: "Every pending input request", status: 200, resp: "PendingList", errors: []int{401}},
		{method: "GET", path: "/v1/sessions", id: "listSessions", summary: "List sessions, newest activity first",
			params: []apiParam{queryParam("agent", "string", "only this agent"), queryParam("parent", "string", "only direct forks of this session"),
				queryParam("q", "string", "substring of id, title or agent"), queryParam("cursor", "string", "next_cursor of the previous page"),
				queryParam("limit", "integer", "page size, 1..1000, default 50")}, status: 200, resp: "SessionPage", errors: []int{400, 401, 422}},
		{method: "POST", path: "/v1/sessions", id: "createSession", summary: "Create an empty session (e.g. for ingest)", body: "CreateSessionRequest", bodyOptional: true, status: 201, resp: "Session", errors: write},
		{method: "GET", path: "/v1/sessions/{id}", id: "getSession", summary: "Get a session", params: []apiParam{pID}, status: 200, resp: "Session", errors: read},
		{method: "DELETE", path: "/v1/sessions/{id}", id: "deleteSession", summary: "Delete a session (409 while forks depend on it)", params: []apiParam{pID}, status: 204, errors: []int{401, 404, 409}},
		{method: "GET", path: "/v1/sessions/{id}/summary", id: "summary", summary: "Counts, tokens, cost and ranges of a session", params: []apiParam{pID}, status: 200, resp: "Summary", errors: read},
		{method: "GET", path: "/v1/sessions/{id}/context", id: "contextPreview", summary: "The exact request the next model call would send",
			params: []apiParam{pID, queryParam("agent", "string", "agent to preview with; default the session's"),
				queryParam("at", "integer", "rebuild the request of step at (the messages committed before it, in its run's context); default the next request")}, status: 200, resp: "ContextPreview", errors: []int{401, 404, 422}},
		{method: "POST", path: "/v1/sessions/{id}/fork", id: "fork", summary: "Fork a session at a sequence (O(1))", params: []apiParam{pID}, body: "ForkRequest", status: 201, resp: "Session", errors: write},
		{method: "POST", path: "/v1/sessions/{id}/retry", id: "retry", summary: "Regenerate from a sequence (fork by default)", params: []apiParam{pID}, body: "RetryRequest", status: 201, resp: "RunCreated", errors: write},
		{method: "POST", path: "/v1/sessions/{id}/replay", id: "replay", summary: "Replay a session reusing recorded outputs", params: []apiParam{pID}, body: "ReplayRequest", bodyOptional: true, status: 201, resp: "RunCreated", errors: write},
		{method: "GET", path: "/v1/sessions/{id}/forks", id: "forks", summary: "Direct forks of a session", params: []apiParam{pID}, status: 200, resp: "SessionList", errors: read},
		{method: "GET", path: "/v1/sessions/{id}/tree", id: "tree", summary: "Fork tree from the root ancestor", params: []apiParam{pID}, status: 200, resp: "ForkTree", errors: read},
		{method: "GET", path: "/v1/sessions/{id}/events", id: "sessionEvents", summary: "SSE stream of a session's events", params: []apiParam{pID, pAfter, pLastID}, status: 200, stream: true, errors: []int{400, 401, 404}},
		{method: "GET", path: "/v1/sessions/{id}/steps", id: "listSteps", summary: "Steps by sequence range",
			params: []apiParam{pID, queryParam("start_seq", "integer", "first sequence, inclusive"), queryParam("end_seq", "integer", "last sequence, inclusive"), queryParam("limit", "integer", "at most this many")},
			status: 200, resp: "StepList", errors: []int{400, 401, 404}},
		{method: "POST", path: "/v1/sessions/{id}/steps", id: "ingest", summary: "Record steps produced elsewhere (step wire format)", params: []apiParam{pID}, body: "IngestRequest", status: 201, resp: "StepList", errors: write},
		{method: "DELETE", path: "/v1/sessions/{id}/steps", id: "truncate", summary: "Delete steps >= start_seq (409 under a fork)",
			params: []apiParam{pID, {name: "start_seq", in: "query", typ: "integer", desc: "first sequence to delete", required: true}}, status: 200, resp: "TruncateResult", errors: []int{400, 401, 404, 409, 422}},
		{method: "GET", path: "/v1/sessions/{id}/steps/{sequence}", id: "getStep", summary: "One step by sequence (lineage aware)",
			params: []apiParam{pID, {name: "sequence", in: "path", typ: "integer", desc: "step sequence", required: true}}, status: 200, resp: "Step", errors: []int{400, 401, 404}},
		{method: "POST", path: "/v1/agui/{agent}", id: "agui", summary: "Run an agent with the AG-UI protocol (RunAgentInput in, AG-UI events out as SSE)",
			params: []apiParam{pathParam("agent", "agent name")}, body: "RunAgentInput", status: 200, stream: true, errors: write},
	}
}

// openAPI: GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	opsOnce.Do(func() { opsDoc, _ = json.Marshal(openAPIDocument()) })
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(opsDoc)
	return nil
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func openAPIDocument() map[string]any {
	paths := map[string]any{}
	ops := append(apiOps(), dashboardOps()...)
	ops = append(ops, observationOps()...)
	ops = append(ops, searchOps()...)
	ops = append(ops, otlpOps()...)
	ops = append(ops, langSmithOps()...)
	ops = append(ops, metricsOps()...)
	ops = append(ops, judgeOps()...)
	ops = append(ops, workerOps()...)
	ops = append(ops, mcpOps()...)
	ops = append(ops, a2aOps()...)
	ops = append(ops, langGraphOps()...)
	for _, op := range ops {
		item, _ := paths[op.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[op.path] = item
		}
		o := map[string]any{"operationId": op.id, "summary": op.summary}
		var params []any
		for _, p := range op.params {
			params = append(params, map[string]any{"name": p.name, "in": p.in, "required": p.required, "description": p.desc, "schema": map[string]any{"type": p.typ}})
		}
		if params != nil {
			o["parameters"] = params
		}
		if op.body != "" {
			o["requestBody"] = map[string]any{"required": !op.bodyOptional, "content": map[string]any{"application/json": map[string]any{"schema": ref(op.body)}}}
		}
		if op.otlp != "" {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/x-protobuf": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}},
				"application/json":       map[string]any{"schema": ref(op.otlp)}}}
		}
		if op.form {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"multipart/form-data": map[string]any{"schema": map[string]any{"type": "object", "description": "parts post.ID, patch.ID, post.ID.FIELD, patch.ID.FIELD (JSON), feedback.ID, attachment.ID.NAME"}}}}
		}
		resps := map[string]any{}
		ok := map[string]any{"description": http.StatusText(op.status)}
		switch {
		case op.stream:
			ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string",
				"description": "Server-Sent Events; each event has id SEQ:IDX, event <type> and data " + eventSchemaName(op.path)}}}
		case op.resp != "":
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(op.resp)}}
		case op.id == "getOpenAPI":
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
		}
		resps[itoa(op.status)] = ok
		if op.id == "nextStep" {
			resps["204"] = map[string]any{"description": "nothing new before the timeout; the Stepwise-Cursor header repeats the cursor"}
		}
		for _, code := range op.errors {
			resps[itoa(code)] = map[string]any{"$ref": "#/components/responses/Problem" + itoa(code)}
		}
		for _, code := range op.detailErrors {
			resps[itoa(code)] = map[string]any{"description": http.StatusText(code) + ` ({"detail": …}, LangSmith's and LangGraph's error shape)`, "content": map[string]any{
				"application/json": map[string]any{"schema": ref("LangSmithDetail")}}}
		}
		if op.otlp != "" {
			for _, code := range []int{400, 413, 415, 503} {
				resps[itoa(code)] = map[string]any{"description": http.StatusText(code) + " (OTLP error)", "content": map[string]any{
					"application/json": map[string]any{"schema": ref("OTLPStatus")}, "application/x-protobuf": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
			}
		}
		o["responses"] = resps
		item[lower(op.method)] = o
	}
	responses := map[string]any{}
	for _, code := range []int{400, 401, 404, 409, 413, 415, 422, 503} {
		responses["Problem"+itoa(code)] = map[string]any{"description": http.StatusText(code),
			"content": map[string]any{"application/problem+json": map[string]any{"schema": ref("Problem")}}}
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Stepwise API", "version": "1",
			"description": "The HTTP API of a Stepwise engine: agents, runs, human input, sessions, steps, resumable SSE streams and AG-UI. See docs/http_api.md."},
		"paths":    paths,
		"security": []any{map[string]any{"bearer": []any{}}, map[string]any{}},
		"components": map[string]any{
			"schemas":         withSchemas(schemas(), dashboardSchemas(), observationSchemas(), searchSchemas(), otlpSchemas(), langSmithSchemas(), metricsSchemas(), workerSchemas(), mcpSchemas(), a2aSchemas(), langGraphSchemas()),
			"responses":       responses,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "required when the server has tokens"}},
		},
	}
}

func eventSchemaName(path string) string {
	if path == "/v1/agui/{agent}" {
		return "AGUIEvent (data lines only)"
	}
	if path == mcpPath {
		return "JSONRPCMessage (MCP)"
	}
	return "Event"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
