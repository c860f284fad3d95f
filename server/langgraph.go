package server

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// The LangGraph Server API (the Agent Protocol the @langchain/langgraph-sdk
// Client speaks), under /langgraph: point the SDK's apiUrl at
// http://HOST/langgraph. Assistants are agents, threads are sessions, a
// run is a run, a checkpoint is a step. Errors are LangGraph's
// {"detail": "..."} bodies. See docs/protocols.md.

const langGraphPrefix = "/langgraph"

// langGraphKey is the server token a LangGraph client sends as x-api-key,
// as an Authorization header value; "" when there is none.
func langGraphKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" && strings.HasPrefix(r.URL.Path, langGraphPrefix+"/") {
		return "Bearer " + k
	}
	return ""
}

// lg registers a LangGraph endpoint: its errors are {"detail": ...}.
func (s *Server) lg(method, path string, h handlerFunc) {
	s.handle(method, langGraphPrefix+path, func(w http.ResponseWriter, r *http.Request) error {
		if err := h(w, r); err != nil {
			s.lgFail(w, r, storeDeadlineErr(r.Context(), err))
		}
		return nil
	})
}

// lgFail writes err as LangGraph's error body, with the status the rest of
// the API would answer.
func (s *Server) lgFail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	p, internal := problemOf(err)
	if internal && p.Status == http.StatusInternalServerError {
		s.log.Error("langgraph: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	writeJSON(w, p.Status, obj{"detail": p.Detail})
}

// registerLangGraph installs the LangGraph Server API.
func (s *Server) registerLangGraph() {
	get, post, del, patch := http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPatch
	s.lg(post, "/assistants/search", s.lgAssistantSearch)
	s.lg(post, "/assistants/count", s.lgAssistantCount)
	s.lg(get, "/assistants/{assistant}", s.lgAssistantGet)
	s.lg(get, "/assistants/{assistant}/graph", s.lgAssistantGraph)
	s.lg(get, "/assistants/{assistant}/schemas", s.lgAssistantSchemas)

	s.lg(post, "/threads", s.lgThreadCreate)
	s.lg(post, "/threads/search", s.lgThreadSearch)
	s.lg(post, "/threads/count", s.lgThreadCount)
	s.lg(get, "/threads/{thread}", s.lgThreadGet)
	s.lg(patch, "/threads/{thread}", s.lgThreadUpdate)
	s.lg(del, "/threads/{thread}", s.lgThreadDelete)
	s.lg(post, "/threads/{thread}/copy", s.lgThreadCopy)
	s.lg(get, "/threads/{thread}/state", s.lgState)
	s.lg(get, "/threads/{thread}/state/{checkpoint}", s.lgState)
	s.lg(post, "/threads/{thread}/state/checkpoint", s.lgStateAt)
	s.lg(post, "/threads/{thread}/state", s.lgUpdateState)
	s.lg(post, "/threads/{thread}/history", s.lgHistory)

	s.lg(post, "/threads/{thread}/runs", s.lgRunCreate)
	s.lg(post, "/threads/{thread}/runs/stream", s.lgRunStream)
	s.lg(post, "/threads/{thread}/runs/wait", s.lgRunWait)
	s.lg(get, "/threads/{thread}/runs", s.lgRunList)
	s.lg(get, "/threads/{thread}/runs/{run}", s.lgRunGet)
	s.lg(get, "/threads/{thread}/runs/{run}/join", s.lgRunJoin)
	s.lg(get, "/threads/{thread}/runs/{run}/stream", s.lgRunJoinStream)
	s.lg(post, "/threads/{thread}/runs/{run}/cancel", s.lgRunCancel)
	s.lg(post, "/runs/stream", s.lgRunStream)
	s.lg(post, "/runs/wait", s.lgRunWait)
}

// langGraphUnbounded reports whether a LangGraph endpoint waits by design
// (streams, wait, join): no store deadline.
func langGraphUnbounded(pattern string) bool {
	return strings.HasPrefix(pattern, langGraphPrefix+"/") &&
		(strings.HasSuffix(pattern, "/stream") || strings.HasSuffix(pattern, "/wait") || strings.HasSuffix(pattern, "/join") ||
			pattern == langGraphPrefix+"/threads/{thread}/runs")
}

// Assistants.

// lgAssistantID is the assistant id of an agent: a UUID (version 5 layout)
// derived from its name, so that it is the same on every server.
func lgAssistantID(agent string) string {
	sum := sha1.Sum([]byte("stepwise-agent\x00" + agent))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// lgAgent resolves an assistant id: an agent's derived id or its name (the
// graph id, as LangGraph also accepts).
func (s *Server) lgAgent(id string) (*stepwise.Agent, error) {
	if id == "" {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "assistant_id is required")
	}
	for _, a := range s.eng.Agents() {
		if a.Name == id || lgAssistantID(a.Name) == id {
			return a, nil
		}
	}
	return nil, errorf(http.StatusNotFound, CodeUnknownAgent, "assistant %q not found", truncate(id, 64))
}

func (s *Server) lgAssistant(a *stepwise.Agent) obj {
	version := 1
	if n, err := strconv.Atoi(a.Version); err == nil && n > 0 {
		version = n
	}
	created := s.lgEpoch()
	meta := obj{"created_by": "system"}
	if a.Version != "" {
		meta["stepwise_version"] = a.Version
	}
	return obj{"assistant_id": lgAssistantID(a.Name), "graph_id": a.Name, "name": a.Name, "description": cmpOr(a.Description, "Stepwise agent "+a.Name),
		"config": obj{}, "context": obj{}, "metadata": meta, "version": version, "created_at": created, "updated_at": created}
}

// lgEpoch is the time assistants report as created: the server's start.
func (s *Server) lgEpoch() string { return s.started.UTC().Format(time.RFC3339Nano) }

type lgAssistantQuery struct {
	GraphID   string         `json:"graph_id"`
	Name      string         `json:"name"`
	Metadata  map[string]any `json:"metadata"`
	Limit     *int           `json:"limit"`
	Offset    int            `json:"offset"`
	SortBy    string         `json:"sort_by"`
	SortOrder string         `json:"sort_order"`
	Select    []string       `json:"select"`
}

// lgAssistantSearch: POST /assistants/search.
func (s *Server) lgAssistantSearch(w http.ResponseWriter, r *http.Request) error {
	var q lgAssistantQuery
	if err := s.decodeBody(w, r, &q, true); err != nil {
		return err
	}
	limit, err := lgLimit(q.Limit, q.Offset)
	if err != nil {
		return err
	}
	out := []obj{}
	for _, a := range s.eng.Agents() {
		if (q.GraphID != "" && a.Name != q.GraphID) || (q.Name != "" && !strings.Contains(a.Name, q.Name)) {
			continue
		}
		as := s.lgAssistant(a)
		if !metaMatches(as["metadata"].(obj), q.Metadata) {
			continue
		}
		out = append(out, as)
	}
	out = out[min(q.Offset, len(out)):]
	out = out[:min(limit, len(out))]
	writeJSON(w, http.StatusOK, out)
	return nil
}

type lgAssistantCountQuery struct {
	GraphID  string         `json:"graph_id"`
	Name     string         `json:"name"`
	Metadata map[string]any `json:"metadata"`
}

// lgAssistantCount: POST /assistants/count.
func (s *Server) lgAssistantCount(w http.ResponseWriter, r *http.Request) error {
	var q lgAssistantCountQuery
	if err := s.decodeBody(w, r, &q, true); err != nil {
		return err
	}
	n := 0
	for _, a := range s.eng.Agents() {
		if (q.GraphID == "" || a.Name == q.GraphID) && (q.Name == "" || strings.Contains(a.Name, q.Name)) && metaMatches(s.lgAssistant(a)["metadata"].(obj), q.Metadata) {
			n++
		}
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

func metaMatches(have obj, want map[string]any) bool {
	for k, v := range want {
		if fmt.Sprint(have[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func lgLimit(limit *int, offset int) (int, error) {
	n := 10
	if limit != nil {
		n = *limit
	}
	if n < 1 || n > 1000 || offset < 0 {
		return 0, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "limit must be 1..1000 and offset >= 0")
	}
	return n, nil
}

// lgAssistantGet: GET /assistants/{assistant}.
func (s *Server) lgAssistantGet(w http.ResponseWriter, r *http.Request) error {
	a, err := s.lgAgent(r.PathValue("assistant"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.lgAssistant(a))
	return nil
}

// lgAssistantGraph: GET /assistants/{assistant}/graph, the agent's step
// graph as LangGraph draws it: __start__, the built-in llm and tools steps
// and the custom steps, __end__; the built-in routes as edges (a custom
// step chooses its next step at run time: GET /v1/agents/{name}/graph is
// the graph its runs took).
func (s *Server) lgAssistantGraph(w http.ResponseWriter, r *http.Request) error {
	a, err := s.lgAgent(r.PathValue("assistant"))
	if err != nil {
		return err
	}
	node := func(id, kind string) obj {
		return obj{"id": id, "type": "runnable", "data": obj{"id": []string{"stepwise", kind}, "name": id}}
	}
	nodes := []obj{{"id": "__start__", "type": "schema", "data": "__start__"}, node(stepwise.StepLLM, "llm"), node(stepwise.StepTools, "tools")}
	for _, name := range slices.Sorted(maps.Keys(a.Steps)) {
		if name != stepwise.StepLLM && name != stepwise.StepTools {
			nodes = append(nodes, node(name, "custom"))
		}
	}
	nodes = append(nodes, obj{"id": "__end__", "type": "schema", "data": "__end__"})
	start := cmpOr(a.StartStep, stepwise.StepLLM)
	after := cmpOr(a.AfterLLM, stepwise.StepEnd)
	if after == stepwise.StepEnd {
		after = "__end__"
	}
	edges := []obj{{"source": "__start__", "target": start},
		{"source": stepwise.StepLLM, "target": stepwise.StepTools, "conditional": true},
		{"source": stepwise.StepLLM, "target": after, "conditional": true},
		{"source": stepwise.StepTools, "target": stepwise.StepLLM}}
	writeJSON(w, http.StatusOK, obj{"nodes": nodes, "edges": edges})
	return nil
}

// lgAssistantSchemas: GET /assistants/{assistant}/schemas.
func (s *Server) lgAssistantSchemas(w http.ResponseWriter, r *http.Request) error {
	a, err := s.lgAgent(r.PathValue("assistant"))
	if err != nil {
		return err
	}
	messages := obj{"type": "array", "items": obj{"type": "object"}, "description": "LangChain messages; the last human one is the turn's input"}
	state := obj{"type": "object", "title": a.Name, "properties": obj{"messages": messages}, "additionalProperties": true,
		"description": "the thread's messages and the agent's custom state (a JSON object)"}
	writeJSON(w, http.StatusOK, obj{"graph_id": a.Name, "input_schema": state, "output_schema": state, "state_schema": state,
		"config_schema": obj{"type": "object"}, "context_schema": obj{"type": "object"}})
	return nil
}

// Threads.

// lgThreadOf reads the session of the path's thread.
func (s *Server) lgSession(ctx context.Context, r *http.Request) (*stepwise.Session, error) {
	id := r.PathValue("thread")
	if err := checkID("thread_id", id); err != nil {
		return nil, err
	}
	sess, err := s.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, CodeNotFound, "thread %s not found", id)
	}
	return sess, err
}

// lgRuns lists a thread's top-level runs, newest first.
func (s *Server) lgRuns(ctx context.Context, sessionID string) ([]*stepwise.Run, error) {
	runs, err := s.eng.Store().RunList(ctx, &store.RunListParams{SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	out := runs[:0:0]
	for _, r := range runs {
		if r.Hop == 0 {
			out = append(out, r)
		}
	}
	sortRunsNewest(out)
	return out, nil
}

func sortRunsNewest(runs []*stepwise.Run) {
	slices.SortFunc(runs, func(a, b *stepwise.Run) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
}

// lgThreadStatus is a thread's status: busy while a run is queued or
// running, interrupted while one waits for input, error when the last run
// failed, else idle.
func lgThreadStatus(runs []*stepwise.Run) string {
	for _, r := range runs {
		switch r.Status {
		case steptype.RunQueued, steptype.RunRunning:
			return "busy"
		case steptype.RunWaiting:
			return "interrupted"
		}
	}
	if len(runs) > 0 && runs[0].Status == steptype.RunFailed {
		return "error"
	}
	return "idle"
}

// lgThread builds a thread: the session, its status, values and
// interrupts.
func (s *Server) lgThread(ctx context.Context, sess *stepwise.Session) (obj, error) {
	runs, err := s.lgRuns(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	return s.lgThreadOf(ctx, sess, runs)
}

// lgThreadOf is lgThread given the session's top-level runs, newest first.
func (s *Server) lgThreadOf(ctx context.Context, sess *stepwise.Session, runs []*stepwise.Run) (obj, error) {
	v, err := s.lgLoad(ctx, sess, lgAll)
	if err != nil {
		return nil, err
	}
	interrupts := obj{}
	pending, err := s.lgInterrupts(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	for _, in := range pending {
		interrupts[in.taskID] = []obj{in.obj}
	}
	status := lgThreadStatus(runs)
	t := obj{"thread_id": sess.ID, "created_at": lgTime(sess.CreatedAt), "updated_at": lgTime(sess.UpdatedAt), "state_updated_at": lgTime(sess.UpdatedAt),
		"metadata": lgMetadata(sess), "status": status, "values": v.values(), "interrupts": interrupts,
		"config": obj{"configurable": obj{"thread_id": sess.ID}}}
	if status == "error" && runs[0].Error != nil {
		t["error"] = runs[0].Error.Message
	}
	return t, nil
}

func lgTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func lgMetadata(sess *stepwise.Session) obj {
	m := obj{}
	if len(sess.Metadata) > 0 {
		_ = json.Unmarshal(sess.Metadata, &m)
	}
	if m == nil {
		m = obj{}
	}
	if _, ok := m["graph_id"]; !ok && sess.Agent != "" {
		m["graph_id"] = sess.Agent
	}
	if sess.ParentSessionID != "" {
		m["stepwise_forked_from"] = sess.ParentSessionID
		m["stepwise_fork_sequence"] = sess.ForkSequence
	}
	return m
}

type lgThreadCreateRequest struct {
	ThreadID   string          `json:"thread_id"`
	Metadata   map[string]any  `json:"metadata"`
	IfExists   string          `json:"if_exists"`
	Supersteps json.RawMessage `json:"supersteps"`
	TTL        json.RawMessage `json:"ttl"`
}

// lgThreadCreate: POST /threads {thread_id?, metadata?, if_exists?}. A
// metadata graph_id names the thread's agent.
func (s *Server) lgThreadCreate(w http.ResponseWriter, r *http.Request) error {
	var req lgThreadCreateRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if len(req.Supersteps) > 0 && string(req.Supersteps) != "null" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "supersteps are not supported: create the thread, then run it")
	}
	if len(req.TTL) > 0 && string(req.TTL) != "null" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "ttl is not supported: threads are kept until deleted (stepwise prune removes old sessions)")
	}
	if req.IfExists != "" && req.IfExists != "raise" && req.IfExists != "do_nothing" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, `if_exists must be "raise" or "do_nothing"`)
	}
	agent := ""
	if g, ok := req.Metadata["graph_id"]; ok {
		gs, _ := g.(string)
		a, err := s.lgAgent(gs)
		if err != nil {
			return err
		}
		agent = a.Name
	}
	id := req.ThreadID
	if id == "" {
		id = stepwise.NewID()
	} else if err := checkID("thread_id", id); err != nil {
		return err
	}
	var meta json.RawMessage
	if len(req.Metadata) > 0 {
		meta, _ = json.Marshal(req.Metadata)
	}
	st := s.eng.Store()
	sess, err := st.SessionCreate(r.Context(), &store.SessionCreateParams{ID: id, Agent: agent, Title: "LangGraph thread", Metadata: meta})
	if errors.Is(err, store.ErrConflict) {
		if req.IfExists != "do_nothing" {
			return errorf(http.StatusConflict, CodeConflict, "thread %s already exists", id)
		}
		sess, err = st.SessionGet(r.Context(), &store.SessionGetParams{ID: id})
	}
	if err != nil {
		return err
	}
	return s.lgWriteThread(w, r, sess)
}

// lgWriteThread answers 200 with the thread of sess.
func (s *Server) lgWriteThread(w http.ResponseWriter, r *http.Request, sess *stepwise.Session) error {
	t, err := s.lgThread(r.Context(), sess)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// lgThreadGet: GET /threads/{thread}.
func (s *Server) lgThreadGet(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	return s.lgWriteThread(w, r, sess)
}

type lgThreadUpdateRequest struct {
	Metadata map[string]any  `json:"metadata"`
	TTL      json.RawMessage `json:"ttl"`
}

// lgThreadUpdate: PATCH /threads/{thread} {metadata}: merged into the
// session's metadata.
func (s *Server) lgThreadUpdate(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	var req lgThreadUpdateRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if len(req.TTL) > 0 && string(req.TTL) != "null" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "ttl is not supported: threads are kept until deleted")
	}
	if len(req.Metadata) > 0 {
		meta, _ := json.Marshal(req.Metadata)
		if sess, err = s.eng.Store().SessionUpdate(r.Context(), &store.SessionUpdateParams{ID: sess.ID, Metadata: meta}); err != nil {
			return err
		}
	}
	return s.lgWriteThread(w, r, sess)
}

// lgThreadDelete: DELETE /threads/{thread}. Refused (409) while a run is
// unfinished or a fork (a copy) shares its steps.
func (s *Server) lgThreadDelete(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	if err := s.eng.DeleteSession(r.Context(), sess.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lgThreadCopy: POST /threads/{thread}/copy, a fork at the last step (O(1):
// the copy shares the steps).
func (s *Server) lgThreadCopy(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	var cp *stepwise.Session
	if sess.LastSequence == 0 {
		cp, err = s.eng.Store().SessionCreate(r.Context(), &store.SessionCreateParams{ID: stepwise.NewID(), Agent: sess.Agent, Title: "copy of " + cmpOr(sess.Title, sess.ID), Metadata: sess.Metadata})
	} else {
		cp, err = s.eng.Fork(r.Context(), stepwise.ForkParams{SessionID: sess.ID, At: sess.LastSequence, Title: "copy of " + cmpOr(sess.Title, sess.ID)})
	}
	if err != nil {
		return err
	}
	t, err := s.lgThread(r.Context(), cp)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

type lgThreadCountQuery struct {
	Metadata map[string]any  `json:"metadata"`
	Values   json.RawMessage `json:"values"`
	Status   string          `json:"status"`
}

// lgThreadCount: POST /threads/count {metadata?, status?}.
func (s *Server) lgThreadCount(w http.ResponseWriter, r *http.Request) error {
	var q lgThreadCountQuery
	if err := s.decodeBody(w, r, &q, true); err != nil {
		return err
	}
	if err := lgThreadFilter(q.Values, q.Status); err != nil {
		return err
	}
	ctx := r.Context()
	n, cursor := 0, ""
	for {
		page, err := s.eng.Store().SessionList(ctx, &store.SessionListParams{Metadata: q.Metadata, Cursor: cursor, Limit: 1000})
		if err != nil {
			return err
		}
		for _, sess := range page.Sessions {
			if q.Status == "" {
				n++
				continue
			}
			runs, err := s.lgRuns(ctx, sess.ID)
			if err != nil {
				return err
			}
			if lgThreadStatus(runs) == q.Status {
				n++
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

// lgThreadFilter checks the values and status filters of a thread search.
func lgThreadFilter(values json.RawMessage, status string) error {
	if len(values) > 0 && string(values) != "null" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "searching threads by values is not supported; search by metadata")
	}
	switch status {
	case "", "idle", "busy", "interrupted", "error":
		return nil
	}
	return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "status must be idle, busy, interrupted or error")
}

type lgThreadQuery struct {
	Metadata  map[string]any  `json:"metadata"`
	IDs       []string        `json:"ids"`
	Limit     *int            `json:"limit"`
	Offset    int             `json:"offset"`
	Status    string          `json:"status"`
	SortBy    string          `json:"sort_by"`
	SortOrder string          `json:"sort_order"`
	Select    []string        `json:"select"`
	Values    json.RawMessage `json:"values"`
}

// lgThreadSearch: POST /threads/search {metadata?, ids?, status?, limit,
// offset}, newest first.
func (s *Server) lgThreadSearch(w http.ResponseWriter, r *http.Request) error {
	var q lgThreadQuery
	if err := s.decodeBody(w, r, &q, true); err != nil {
		return err
	}
	limit, err := lgLimit(q.Limit, q.Offset)
	if err != nil {
		return err
	}
	if err := lgThreadFilter(q.Values, q.Status); err != nil {
		return err
	}
	sortBy, desc := q.SortBy, q.SortOrder != "asc"
	switch {
	case sortBy != "" && sortBy != "thread_id" && sortBy != "created_at" && sortBy != "updated_at" && sortBy != "state_updated_at":
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "sort_by must be thread_id, created_at, updated_at or state_updated_at")
	case q.SortOrder != "" && q.SortOrder != "asc" && q.SortOrder != "desc":
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, `sort_order must be "asc" or "desc"`)
	}
	// The store lists newest activity first: another order reads every
	// matching session before sorting.
	sorted := sortBy == "" || ((sortBy == "updated_at" || sortBy == "state_updated_at") && desc)
	ctx := r.Context()
	st := s.eng.Store()
	var sessions []*stepwise.Session
	if len(q.IDs) > 0 {
		for _, id := range q.IDs {
			if checkID("ids", id) != nil {
				continue
			}
			sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: id})
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if metaMatches(lgMetadata(sess), q.Metadata) {
				sessions = append(sessions, sess)
			}
		}
	} else {
		cursor := ""
		for {
			page, err := st.SessionList(ctx, &store.SessionListParams{Metadata: q.Metadata, Cursor: cursor, Limit: 1000})
			if err != nil {
				return err
			}
			sessions = append(sessions, page.Sessions...)
			if page.Next == "" || (sorted && q.Status == "" && len(sessions) >= q.Offset+limit) {
				break
			}
			cursor = page.Next
		}
	}
	if !sorted {
		slices.SortStableFunc(sessions, func(a, b *stepwise.Session) int {
			c := 0
			switch sortBy {
			case "thread_id":
				c = strings.Compare(a.ID, b.ID)
			case "created_at":
				c = a.CreatedAt.Compare(b.CreatedAt)
			default:
				c = a.UpdatedAt.Compare(b.UpdatedAt)
			}
			if desc {
				c = -c
			}
			return c
		})
	}
	out := []obj{}
	skipped := 0
	for _, sess := range sessions {
		if len(out) == limit {
			break
		}
		runs, err := s.lgRuns(ctx, sess.ID)
		if err != nil {
			return err
		}
		// The status first: the values are read only for the threads kept.
		if q.Status != "" && lgThreadStatus(runs) != q.Status {
			continue
		}
		if skipped < q.Offset {
			skipped++
			continue
		}
		t, err := s.lgThreadOf(ctx, sess, runs)
		if err != nil {
			return err
		}
		out = append(out, t)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// langGraphOps document the LangGraph endpoints; their bodies are
// LangGraph's (the Agent Protocol), summarised in the schemas.
func langGraphOps() []apiOp {
	p := langGraphPrefix
	pThread := pathParam("thread", "the thread id (a session id)")
	pRun := pathParam("run", "the run id")
	pAssistant := pathParam("assistant", "the assistant id (derived from the agent name) or the agent name")
	pCheckpoint := pathParam("checkpoint", "the checkpoint id (a step id)")
	pLastID := apiParam{name: "Last-Event-ID", in: "header", typ: "string", desc: "resume after this event id (SEQ:IDX)"}
	pModes := queryParam("stream_mode", "string", "values, updates, messages, messages-tuple, custom, events (repeat, comma-separate or a JSON list)")
	errs := []int{400, 404, 409, 413, 415, 422, 503}
	run := func(method, path, id, summary string, params []apiParam, stream bool, resp string) apiOp {
		return apiOp{method: method, path: p + path, id: id, summary: "LangGraph: " + summary, params: params, body: "LangGraphRunCreate", status: 200, resp: resp, stream: stream, errors: []int{401}, detailErrors: errs}
	}
	op := func(method, path, id, summary string, params []apiParam, body, resp string, status int) apiOp {
		return apiOp{method: method, path: p + path, id: id, summary: "LangGraph: " + summary, params: params, body: body, bodyOptional: body != "", status: status, resp: resp, errors: []int{401}, detailErrors: errs}
	}
	return []apiOp{
		op("POST", "/assistants/count", "langGraphAssistantCount", "count assistants", nil, "LangGraphAssistantCount", "LangGraphCount", 200),
		op("POST", "/assistants/search", "langGraphAssistantSearch", "search assistants (one per agent; graph_id = agent name)", nil, "LangGraphAssistantSearch", "LangGraphAssistants", 200),
		op("GET", "/assistants/{assistant}", "langGraphAssistantGet", "get an assistant", []apiParam{pAssistant}, "", "LangGraphAssistant", 200),
		op("GET", "/assistants/{assistant}/graph", "langGraphAssistantGraph", "the agent's step graph (built-in routes; custom steps route at run time)", []apiParam{pAssistant}, "", "LangGraphGraph", 200),
		op("GET", "/assistants/{assistant}/schemas", "langGraphAssistantSchemas", "the input, output and state schemas (messages and the custom state)", []apiParam{pAssistant}, "", "LangGraphSchemas", 200),
		op("POST", "/threads", "langGraphThreadCreate", "create a thread (a session; metadata.graph_id names its agent)", nil, "LangGraphThreadCreate", "LangGraphThread", 200),
		op("POST", "/threads/count", "langGraphThreadCount", "count threads by metadata and status", nil, "LangGraphThreadCount", "LangGraphCount", 200),
		op("POST", "/threads/search", "langGraphThreadSearch", "search threads by metadata, ids and status", nil, "LangGraphThreadSearch", "LangGraphThreads", 200),
		op("GET", "/threads/{thread}", "langGraphThreadGet", "get a thread: status, values, interrupts", []apiParam{pThread}, "", "LangGraphThread", 200),
		op("PATCH", "/threads/{thread}", "langGraphThreadUpdate", "merge metadata into a thread's", []apiParam{pThread}, "LangGraphThreadUpdate", "LangGraphThread", 200),
		op("DELETE", "/threads/{thread}", "langGraphThreadDelete", "delete a thread (409 while a run is unfinished or a copy shares its steps)", []apiParam{pThread}, "", "", 204),
		op("POST", "/threads/{thread}/copy", "langGraphThreadCopy", "copy a thread: an O(1) fork at its last step", []apiParam{pThread}, "", "LangGraphThread", 200),
		op("GET", "/threads/{thread}/state", "langGraphState", "the thread's latest state: values, next, checkpoint, tasks with interrupts", []apiParam{pThread}, "", "LangGraphThreadState", 200),
		op("GET", "/threads/{thread}/state/{checkpoint}", "langGraphStateAt", "the thread's state at a checkpoint (a step)", []apiParam{pThread, pCheckpoint}, "", "LangGraphThreadState", 200),
		op("POST", "/threads/{thread}/state/checkpoint", "langGraphStateAtCheckpoint", "the thread's state at the checkpoint named in the body", []apiParam{pThread}, "LangGraphStateAt", "LangGraphThreadState", 200),
		op("POST", "/threads/{thread}/state", "langGraphUpdateState", "update the thread's state: values (not messages) recorded as a state patch step", []apiParam{pThread}, "LangGraphUpdateState", "LangGraphUpdated", 200),
		op("POST", "/threads/{thread}/history", "langGraphHistory", "the thread's checkpoints, one per step, newest first", []apiParam{pThread}, "LangGraphHistory", "LangGraphThreadStates", 200),
		run("POST", "/threads/{thread}/runs", "langGraphRunCreate", "start a background run (multitask_strategy reject, enqueue, interrupt, rollback; command.resume answers the interrupt; checkpoint_id runs on a fork there)", []apiParam{pThread}, false, "LangGraphRun"),
		run("POST", "/threads/{thread}/runs/stream", "langGraphRunStream", "start a run and stream it (event: <mode>, data: <json>; metadata first)", []apiParam{pThread}, true, ""),
		run("POST", "/threads/{thread}/runs/wait", "langGraphRunWait", "start a run and answer its final values", []apiParam{pThread}, false, "LangGraphValues"),
		op("GET", "/threads/{thread}/runs", "langGraphRunList", "list a thread's runs, newest first", []apiParam{pThread, queryParam("limit", "integer", "default 10"), queryParam("offset", "integer", ""), queryParam("status", "string", "pending, running, success, error, interrupted")}, "", "LangGraphRuns", 200),
		op("GET", "/threads/{thread}/runs/{run}", "langGraphRunGet", "get a run", []apiParam{pThread, pRun}, "", "LangGraphRun", 200),
		op("GET", "/threads/{thread}/runs/{run}/join", "langGraphRunJoin", "wait for a run and answer the thread's values", []apiParam{pThread, pRun}, "", "LangGraphValues", 200),
		{method: "GET", path: p + "/threads/{thread}/runs/{run}/stream", id: "langGraphRunJoinStream", summary: "LangGraph: stream a run from its start, or after Last-Event-ID",
			params: []apiParam{pThread, pRun, pModes, pLastID}, status: 200, stream: true, errors: []int{401}, detailErrors: errs},
		{method: "POST", path: p + "/threads/{thread}/runs/{run}/cancel", id: "langGraphRunCancel", summary: "LangGraph: cancel a run (action=rollback also deletes its steps)",
			params: []apiParam{pThread, pRun, queryParam("wait", "string", "0 or 1"), queryParam("action", "string", "interrupt or rollback")}, status: 202, errors: []int{401}, detailErrors: errs},
		run("POST", "/runs/stream", "langGraphRunStreamNew", "start a run on a new thread and stream it", nil, true, ""),
		run("POST", "/runs/wait", "langGraphRunWaitNew", "start a run on a new thread and answer its final values", nil, false, "LangGraphValues"),
	}
}

func langGraphSchemas() obj {
	free := func(desc string) obj { return obj{"type": "object", "additionalProperties": true, "description": desc} }
	list := func(item string) obj { return obj{"type": "array", "items": ref(item)} }
	meta := obj{"type": "object", "additionalProperties": true, "description": "keys with string, number, boolean or null values"}
	checkpoint := object(true, nil, obj{"thread_id": str(""), "checkpoint_ns": str(""), "checkpoint_id": str("a step id"), "checkpoint_map": anyJSON("")})
	limit := obj{"type": "integer", "minimum": 1, "maximum": 1000, "description": "default 10"}
	strs := arrayOf(str(""))
	unsupported := anyJSON("not supported: refused (422) when set")
	return obj{
		"LangGraphAssistant":  free("assistant_id, graph_id (the agent name), name, description, config, context, metadata, version, created_at, updated_at"),
		"LangGraphAssistants": list("LangGraphAssistant"),
		"LangGraphGraph":      free("nodes ({id, type, data}) and edges ({source, target, conditional?})"),
		"LangGraphSchemas":    free("graph_id, input_schema, output_schema, state_schema, config_schema, context_schema"),
		"LangGraphAssistantSearch": object(true, nil, obj{"graph_id": str("an agent name"), "name": str("a substring of the agent name"), "metadata": meta,
			"limit": limit, "offset": integer(), "sort_by": str("ignored"), "sort_order": str("ignored"), "select": strs}),
		"LangGraphThreadSearch": object(true, nil, obj{"metadata": meta, "ids": strs, "limit": limit, "offset": integer(),
			"status": str("idle, busy, interrupted or error"), "sort_by": str("thread_id, created_at, updated_at (default), state_updated_at"), "sort_order": str("desc (default) or asc"), "select": strs, "values": unsupported}),
		"LangGraphThreadCount":    object(true, nil, obj{"metadata": meta, "values": unsupported, "status": str("idle, busy, interrupted or error")}),
		"LangGraphAssistantCount": object(true, nil, obj{"graph_id": str(""), "name": str(""), "metadata": meta}),
		"LangGraphCount":          integer(),
		"LangGraphThreadCreate": object(true, nil, obj{"thread_id": str("default a new id"), "metadata": meta, "if_exists": str("raise (default, 409) or do_nothing"),
			"supersteps": unsupported, "ttl": unsupported}),
		"LangGraphThreadUpdate": object(true, nil, obj{"metadata": meta, "ttl": unsupported}),
		"LangGraphThread":       free("thread_id, created_at, updated_at, state_updated_at, metadata, status (idle, busy, interrupted, error), values, interrupts"),
		"LangGraphThreads":      list("LangGraphThread"),
		"LangGraphThreadState":  free("values (messages in LangChain's format, and the custom state), next, checkpoint, metadata, created_at, parent_checkpoint, tasks, interrupts"),
		"LangGraphThreadStates": list("LangGraphThreadState"),
		"LangGraphCheckpoint":   checkpoint,
		"LangGraphStateAt":      object(true, []string{"checkpoint"}, obj{"checkpoint": ref("LangGraphCheckpoint"), "subgraphs": boolean()}),
		"LangGraphUpdateState": object(true, []string{"values"}, obj{"values": anyJSON("an object: a state patch (not messages)"), "as_node": str("the custom step's name (default update_state)"),
			"checkpoint_id": str("the latest checkpoint only"), "checkpoint": ref("LangGraphCheckpoint")}),
		"LangGraphUpdated": free("checkpoint: the checkpoint the update made"),
		"LangGraphHistory": object(true, nil, obj{"limit": limit, "before": ref("LangGraphCheckpoint"), "metadata": meta, "checkpoint": ref("LangGraphCheckpoint")}),
		"LangGraphRunCreate": object(true, []string{"assistant_id"}, obj{
			"assistant_id": str("an assistant id or an agent name"), "input": anyJSON(`{"messages": [{"role": "user", "content": "..."}], other keys: a state patch}`),
			"command": object(true, nil, obj{"resume": anyJSON("the answer of the interrupt, or {interrupt_id: answer}"), "update": unsupported, "goto": unsupported}),
			"config":  anyJSON("configurable.checkpoint_id is read"), "context": anyJSON("ignored"), "metadata": meta, "stream_mode": anyJSON("a mode or a list: values, updates, messages, messages-tuple, custom, events"),
			"stream_subgraphs": boolean(), "stream_resumable": boolean(), "feedback_keys": unsupported, "interrupt_before": unsupported, "interrupt_after": unsupported,
			"checkpoint": ref("LangGraphCheckpoint"), "checkpoint_id": str("run from this step: on an O(1) fork of the thread there"), "webhook": unsupported,
			"multitask_strategy": str("reject (default), enqueue, interrupt or rollback"), "on_completion": str("ignored"), "on_disconnect": str("cancel or continue (default)"),
			"after_seconds": unsupported, "if_not_exists": str("reject (default) or create"), "checkpoint_during": boolean(), "durability": str("ignored: every step is durable"), "langsmith_tracer": anyJSON("ignored")}),
		"LangGraphRun":    free("run_id, thread_id, assistant_id, created_at, updated_at, status (pending, running, success, error, interrupted), metadata, multitask_strategy"),
		"LangGraphRuns":   list("LangGraphRun"),
		"LangGraphValues": free("the thread's values; __interrupt__ when the run waits for input, __error__ when it failed"),
	}
}
