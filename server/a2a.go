package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// A2A (Agent2Agent protocol, v1.0, JSON-RPC binding). Each agent has an
// agent card at /a2a/{agent}/.well-known/agent-card.json and a JSON-RPC
// endpoint at POST /a2a/{agent}; /.well-known/agent-card.json is the card of
// the default agent. A task is a run (task id = run id), its context is the
// run's session (contextId = session id). See docs/protocols.md.

const (
	a2aPrefix          = "/a2a/"
	a2aCardPath        = ".well-known/agent-card.json"
	a2aProtocolVersion = "1.0"
)

// JSON-RPC and A2A error codes (A2A specification, section "Error codes").
const (
	rpcParseError          = -32700
	rpcInvalidRequest      = -32600
	rpcMethodNotFound      = -32601
	rpcInvalidParams       = -32602
	rpcInternalError       = -32603
	a2aTaskNotFound        = -32001
	a2aTaskNotCancelable   = -32002
	a2aPushNotSupported    = -32003
	a2aUnsupportedOp       = -32004
	a2aContentTypeNotSupp  = -32005
	a2aExtendedCardMissing = -32007
	a2aVersionNotSupported = -32009
)

// A2A task states (protobuf enum names, as the JSON binding writes them).
const (
	a2aSubmitted     = "TASK_STATE_SUBMITTED"
	a2aWorking       = "TASK_STATE_WORKING"
	a2aInputRequired = "TASK_STATE_INPUT_REQUIRED"
	a2aCompleted     = "TASK_STATE_COMPLETED"
	a2aFailed        = "TASK_STATE_FAILED"
	a2aCanceled      = "TASK_STATE_CANCELED"
	a2aRoleUser      = "ROLE_USER"
	a2aRoleAgent     = "ROLE_AGENT"
)

// rpcError is a JSON-RPC error object; as an error it is what a handler
// answers instead of a result.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

func rpcErrorf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// a2aRequest is a JSON-RPC 2.0 request.
type a2aRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type a2aResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// The A2A data model in its JSON binding (camelCase protobuf JSON).

type a2aPart struct {
	Text      *string         `json:"text,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	// Kind and File are v0.3's (kind "text", "data", "file").
	Kind string          `json:"kind,omitempty"`
	File json.RawMessage `json:"file,omitempty"`
}

type a2aMessage struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []a2aPart      `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
	Kind             string         `json:"kind,omitempty"` // v0.3: "message"
}

type a2aStatus struct {
	State     string      `json:"state"`
	Message   *a2aMessage `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

type a2aArtifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []a2aPart      `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

type a2aTask struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    a2aStatus      `json:"status"`
	Artifacts []a2aArtifact  `json:"artifacts,omitempty"`
	History   []a2aMessage   `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type a2aStatusUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    a2aStatus      `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type a2aArtifactUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  a2aArtifact    `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// a2aEvent is a StreamResponse: exactly one member is set.
type a2aEvent struct {
	Task           *a2aTask           `json:"task,omitempty"`
	Message        *a2aMessage        `json:"message,omitempty"`
	StatusUpdate   *a2aStatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *a2aArtifactUpdate `json:"artifactUpdate,omitempty"`
}

type a2aSendConfig struct {
	AcceptedOutputModes        []string        `json:"acceptedOutputModes,omitempty"`
	TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength              *int            `json:"historyLength,omitempty"`
	ReturnImmediately          bool            `json:"returnImmediately,omitempty"`
	// Blocking and PushNotificationConfig are v0.3's.
	Blocking               *bool           `json:"blocking,omitempty"`
	PushNotificationConfig json.RawMessage `json:"pushNotificationConfig,omitempty"`
}

type a2aSendParams struct {
	Tenant        string         `json:"tenant,omitempty"`
	Message       *a2aMessage    `json:"message"`
	Configuration *a2aSendConfig `json:"configuration,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

type a2aTaskParams struct {
	Tenant        string         `json:"tenant,omitempty"`
	ID            string         `json:"id"`
	HistoryLength *int           `json:"historyLength,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// registerA2A installs the agent cards and the JSON-RPC endpoints.
func (s *Server) registerA2A() {
	s.handle(http.MethodGet, "/"+a2aCardPath, s.a2aRootCard)
	s.handle(http.MethodGet, a2aPrefix+"{agent}/"+a2aCardPath, s.a2aAgentCard)
	s.handle(http.MethodPost, a2aPrefix+"{agent}", s.a2aRPC)
}

// a2aOps document the A2A endpoints; their bodies are A2A's, described by
// its specification.
func a2aOps() []apiOp {
	pAgent := pathParam("agent", "agent name")
	return []apiOp{
		{method: "GET", path: "/" + a2aCardPath, id: "a2aRootCard", status: 200, resp: "A2AAgentCard", errors: []int{401, 404},
			summary: "A2A: the agent card of the default agent (serve: the first agent file's; else the first by name); each agent's card is under /a2a/{agent}/"},
		{method: "GET", path: a2aPrefix + "{agent}/" + a2aCardPath, id: "a2aAgentCard", params: []apiParam{pAgent}, status: 200, resp: "A2AAgentCard", errors: []int{401, 404},
			summary: "A2A: an agent's card (skills from its tools, its JSON-RPC interface, the server's bearer auth)"},
		{method: "POST", path: a2aPrefix + "{agent}", id: "a2aRPC", params: []apiParam{pAgent}, body: "A2AJSONRPCRequest", status: 200, resp: "A2AJSONRPCResponse", errors: []int{401, 404},
			summary: "A2A JSON-RPC: SendMessage, SendStreamingMessage (SSE), GetTask, CancelTask, SubscribeToTask (SSE), and their v0.3 names; a task is a run, its context the run's session (see docs/protocols.md)"},
	}
}

func a2aSchemas() obj {
	return obj{
		"A2AAgentCard": obj{"type": "object", "additionalProperties": true,
			"description": "an A2A v1.0 AgentCard: name, description, supportedInterfaces, version, capabilities, securitySchemes, defaultInputModes, defaultOutputModes, skills"},
		"A2AJSONRPCRequest": obj{"type": "object", "required": []string{"jsonrpc", "id", "method"},
			"description": "a JSON-RPC 2.0 request of the A2A protocol; params as the A2A specification defines them for the method",
			"properties": obj{"jsonrpc": obj{"const": "2.0"}, "id": obj{"type": []string{"string", "integer"}},
				"method": obj{"type": "string", "description": "SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask (or message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe)"},
				"params": obj{"type": "object", "additionalProperties": true}}},
		"A2AJSONRPCResponse": obj{"type": "object",
			"description": "a JSON-RPC 2.0 response: result (a SendMessageResponse, a Task) or error; the streaming methods answer text/event-stream instead, whose data lines are responses whose result is a StreamResponse",
			"properties": obj{"jsonrpc": obj{"const": "2.0"}, "id": obj{"type": []string{"string", "integer", "null"}},
				"result": obj{"type": "object", "additionalProperties": true},
				"error": obj{"type": "object", "properties": obj{"code": obj{"type": "integer"}, "message": obj{"type": "string"}, "data": obj{}},
					"description": "-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid params, -32603 internal, -32001 task not found, -32002 task not cancelable, -32003 push notifications not supported, -32004 unsupported operation, -32005 content type not supported, -32007 no extended card, -32009 version not supported"}}},
	}
}

// a2aRootCard: GET /.well-known/agent-card.json.
func (s *Server) a2aRootCard(w http.ResponseWriter, r *http.Request) error {
	agents := s.eng.Agents()
	if len(agents) == 0 {
		return errorf(http.StatusNotFound, CodeUnknownAgent, "no agent is registered")
	}
	def := agents[0]
	if name := s.cfg.A2ADefaultAgent; name != "" {
		a, err := s.eng.Agent(name)
		if err != nil {
			return err
		}
		def = a
	}
	var others []*stepwise.Agent
	for _, a := range agents {
		if a != def {
			others = append(others, a)
		}
	}
	writeJSON(w, http.StatusOK, s.agentCard(r, def, others))
	return nil
}

// a2aAgentCard: GET /a2a/{agent}/.well-known/agent-card.json.
func (s *Server) a2aAgentCard(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.Agent(r.PathValue("agent"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.agentCard(r, a, nil))
	return nil
}

// agentCard builds an agent's card. others, on the root card, are the other
// agents, named in its description with their cards' URLs.
func (s *Server) agentCard(r *http.Request, a *stepwise.Agent, others []*stepwise.Agent) obj {
	base := requestBase(r)
	desc := a.Description
	if desc == "" {
		desc = "Stepwise agent " + a.Name
	}
	if len(others) > 0 {
		var b strings.Builder
		b.WriteString(desc)
		b.WriteString("\n\nOther agents on this server:")
		for _, o := range others {
			fmt.Fprintf(&b, "\n- %s: %s%s%s/%s", o.Name, base, a2aPrefix, o.Name, a2aCardPath)
		}
		desc = b.String()
	}
	var skills []obj
	for _, t := range a.Tools {
		d := t.Definition()
		if d.Name == stepwise.AskHumanTool {
			continue
		}
		skills = append(skills, obj{"id": d.Name, "name": d.Name, "description": cmpOr(d.Description, "tool "+d.Name), "tags": []string{"tool"}})
	}
	for _, sub := range a.SubAgents {
		skills = append(skills, obj{"id": sub.Name, "name": sub.Name, "description": cmpOr(sub.Description, "sub-agent "+sub.Name), "tags": []string{"agent"}})
	}
	if len(skills) == 0 {
		skills = append(skills, obj{"id": a.Name, "name": a.Name, "description": desc, "tags": []string{"agent"}})
	}
	version := a.Version
	if version == "" {
		version = "1"
	}
	card := obj{
		"name":        a.Name,
		"description": desc,
		"supportedInterfaces": []obj{
			{"url": base + a2aPrefix + a.Name, "protocolBinding": "JSONRPC", "protocolVersion": a2aProtocolVersion},
		},
		"version":            version,
		"capabilities":       obj{"streaming": true, "pushNotifications": false},
		"defaultInputModes":  []string{"text/plain", "application/json"},
		"defaultOutputModes": []string{"text/plain"},
		"skills":             skills,
	}
	if len(s.tokens) > 0 {
		card["securitySchemes"] = obj{"bearer": obj{"httpAuthSecurityScheme": obj{"scheme": "Bearer", "description": "a token of the Stepwise server (--token)"}}}
		card["securityRequirements"] = []obj{{"schemes": obj{"bearer": obj{"list": []string{}}}}}
	}
	return card
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// requestBase is the scheme and host the request was addressed to.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// a2aRPC: POST /a2a/{agent}, one JSON-RPC request. Errors are JSON-RPC
// error responses (HTTP 200), except an unknown agent (404 problem).
func (s *Server) a2aRPC(w http.ResponseWriter, r *http.Request) error {
	agent, err := s.eng.Agent(r.PathValue("agent"))
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return writeRPC(w, nil, nil, rpcErrorf(a2aContentTypeNotSupp, "Content-Type must be application/json, got %q", ct))
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return writeRPC(w, nil, nil, rpcErrorf(rpcInvalidRequest, "request body larger than %d bytes", tooBig.Limit))
		}
		return writeRPC(w, nil, nil, rpcErrorf(rpcParseError, "read request body: %v", err))
	}
	req, rerr := parseRPC(data)
	if rerr != nil {
		var id json.RawMessage
		if req != nil {
			id = req.ID
		}
		return writeRPC(w, id, nil, rerr)
	}
	if v := r.Header.Get("A2A-Version"); v != "" && v != "1.0" && v != "1" && v != "0.3" {
		return writeRPC(w, req.ID, nil, rpcErrorf(a2aVersionNotSupported, "A2A version %q is not supported; this server speaks 1.0 (and the v0.3 method names)", v))
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	x := &a2aCall{s: s, w: w, r: r, ctx: ctx, agent: agent, id: req.ID}
	method := req.Method
	if v1, ok := a2aLegacyMethods[method]; ok {
		method, x.legacy = v1, true
	}
	var result any
	switch method {
	case "SendMessage":
		var p a2aSendParams
		if rerr = decodeParams(req.Params, &p); rerr == nil {
			result, rerr = x.sendMessage(&p)
		}
	case "SendStreamingMessage":
		var p a2aSendParams
		if rerr = decodeParams(req.Params, &p); rerr == nil {
			rerr = x.sendStreaming(&p)
			if rerr == nil {
				return nil
			}
		}
	case "GetTask":
		var p a2aTaskParams
		if rerr = decodeParams(req.Params, &p); rerr == nil {
			result, rerr = x.getTask(&p)
		}
	case "CancelTask":
		var p a2aTaskParams
		if rerr = decodeParams(req.Params, &p); rerr == nil {
			result, rerr = x.cancelTask(&p)
		}
	case "SubscribeToTask":
		var p a2aTaskParams
		if rerr = decodeParams(req.Params, &p); rerr == nil {
			rerr = x.subscribe(&p)
			if rerr == nil {
				return nil
			}
		}
	case "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		rerr = rpcErrorf(a2aPushNotSupported, "push notifications are not supported; stream the task (SendStreamingMessage, SubscribeToTask) or poll GetTask")
	case "GetExtendedAgentCard":
		rerr = rpcErrorf(a2aExtendedCardMissing, "this agent has no extended agent card")
	case "ListTasks":
		rerr = rpcErrorf(a2aUnsupportedOp, "ListTasks is not supported; list runs with GET /v1/sessions and GET /v1/runs/{id}")
	default:
		rerr = rpcErrorf(rpcMethodNotFound, "method %q not found", req.Method)
	}
	if x.started {
		if rerr != nil {
			x.streamError(rerr)
		}
		return nil
	}
	if rerr != nil {
		return writeRPC(w, req.ID, nil, rerr)
	}
	if x.legacy {
		result = legacyResult(result)
	}
	return writeRPC(w, req.ID, result, nil)
}

// a2aLegacyMethods maps the v0.3 method names to v1.0's.
var a2aLegacyMethods = map[string]string{
	"message/send":      "SendMessage",
	"message/stream":    "SendStreamingMessage",
	"tasks/get":         "GetTask",
	"tasks/cancel":      "CancelTask",
	"tasks/resubscribe": "SubscribeToTask",
}

// parseRPC checks the JSON-RPC envelope. On an error the request, when
// non-nil, carries the id to answer with.
func parseRPC(data []byte) (*a2aRequest, *rpcError) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, rpcErrorf(rpcInvalidRequest, "a JSON-RPC request body is required")
	}
	if !json.Valid(data) {
		return nil, rpcErrorf(rpcParseError, "the body is not valid JSON")
	}
	if data[0] == '[' {
		return nil, rpcErrorf(rpcInvalidRequest, "JSON-RPC batches are not supported; send one request per call")
	}
	var req a2aRequest
	if err := decodeStrict(data, &req); err != nil {
		return nil, rpcErrorf(rpcInvalidRequest, "not a JSON-RPC request: %v", err)
	}
	id := bytes.TrimSpace(req.ID)
	if len(id) == 0 || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		if len(id) == 0 || string(id) != "null" {
			req.ID = nil
		}
		return &req, rpcErrorf(rpcInvalidRequest, "id must be a string or a number (notifications are not supported)")
	}
	if req.JSONRPC != "2.0" {
		return &req, rpcErrorf(rpcInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if req.Method == "" {
		return &req, rpcErrorf(rpcInvalidRequest, "method is required")
	}
	return &req, nil
}

// decodeParams decodes params strictly: an unknown member is invalid.
func decodeParams(raw json.RawMessage, dst any) *rpcError {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return rpcErrorf(rpcInvalidParams, "params are required")
	}
	if err := decodeStrict(raw, dst); err != nil {
		return rpcErrorf(rpcInvalidParams, "params: %v", err)
	}
	return nil
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *rpcError) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if rerr != nil {
		result = nil
	} else if result == nil {
		result = obj{}
	}
	writeJSON(w, http.StatusOK, a2aResponse{JSONRPC: "2.0", ID: id, Result: result, Error: rerr})
	return nil
}

// a2aCall is one JSON-RPC call being answered.
type a2aCall struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	ctx     context.Context
	agent   *stepwise.Agent
	id      json.RawMessage
	legacy  bool // a v0.3 method name: v0.3 shapes out
	started bool // an SSE stream was started: errors go in it
	sw      *sseWriter
}

// rpcErrorOf maps an engine or store error to a JSON-RPC error.
func rpcErrorOf(s *Server, err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	switch {
	case errors.Is(err, stepwise.ErrInvalidAnswer), errors.Is(err, store.ErrInvalid):
		return rpcErrorf(rpcInvalidParams, "%v", err)
	case errors.Is(err, stepwise.ErrAlreadyAnswered), errors.Is(err, stepwise.ErrRunFinished), errors.Is(err, stepwise.ErrNotWaiting),
		errors.Is(err, store.ErrSessionBusy), errors.Is(err, store.ErrConflict):
		return rpcErrorf(a2aUnsupportedOp, "%v", err)
	case errors.Is(err, store.ErrNotFound):
		return rpcErrorf(a2aTaskNotFound, "%v", err)
	}
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.status < 500 {
			return rpcErrorf(rpcInvalidParams, "%s", ae.detail)
		}
	}
	p, internal := problemOf(err)
	if internal && p.Status == http.StatusInternalServerError {
		s.log.Error("a2a: internal error", "err", err)
	}
	return &rpcError{Code: rpcInternalError, Message: p.Detail, Data: obj{"code": p.Code}}
}
