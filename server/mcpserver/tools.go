package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/render"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// maxSteps bounds the steps one steps_read or trace_render returns.
const maxSteps = 1000

func (h *handlers) addTools(srv *sdk.Server) {
	addTool(srv, "sessions_list", "List sessions",
		"Lists sessions, newest first; query matches a substring of the id, title or agent. Pass next back as cursor for the next page.",
		true, h.sessionsList)
	addTool(srv, "steps_read", "Read steps",
		"Returns the steps of a session from sequence `from` to `to` (inclusive; at most 1000), as the HTTP API encodes them.",
		true, h.stepsRead)
	addTool(srv, "trace_render", "Render a trace",
		"Renders the steps of a session (from..to) as the plain-text trace the dashboard and `stepwise show` print.",
		true, h.traceRender)
	addTool(srv, "steps_search", "Search past steps",
		"Similarity search over past steps (recall): the k steps most like the query, best first.",
		true, h.stepsSearch)
	addTool(srv, "inputs_list", "List pending requests",
		"Lists the human-input requests and tool-call approvals waiting for an answer, of one run or of all runs.",
		true, h.inputsList)
	addTool(srv, "input_answer", "Answer a pending request",
		"Answers a waiting request: any JSON value that matches the request's schema; an approval takes {\"approved\": true|false}. The run then resumes.",
		false, h.inputAnswer)
	addTool(srv, "run_start", "Start a run",
		"Starts a run of an agent in a new session (or in session_id) with the user's input; the server executes it. Poll run_get for its status.",
		false, h.runStart)
	addTool(srv, "run_get", "Get a run",
		"Returns a run: its status (queued, running, waiting, completed, failed, cancelled), output and error.",
		true, h.runGet)
	addTool(srv, "session_fork", "Fork a session",
		"Forks a session after step `at` (O(1)): the fork shares steps 1..at; edit replaces the content of step `at` in the fork.",
		false, h.sessionFork)
	addTool(srv, "session_retry", "Retry from a step",
		"Retries a session from step `from`: a fork before that step and a run of its agent that makes the step again (or, destructive, in the same session).",
		false, h.sessionRetry)
}

type sessionsListIn struct {
	Query  string `json:"query,omitempty" jsonschema:"a substring of the session's id, title or agent"`
	Agent  string `json:"agent,omitempty" jsonschema:"only sessions of this agent"`
	Parent string `json:"parent,omitempty" jsonschema:"only direct forks of this session"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next of the previous page"`
	Limit  int    `json:"limit,omitempty" jsonschema:"sessions per page: 1..1000, default 50"`
}

type sessionsListOut struct {
	Sessions []*steptype.Session `json:"sessions"`
	Next     string              `json:"next,omitempty" jsonschema:"cursor of the next page; empty at the end"`
}

func (h *handlers) sessionsList(ctx context.Context, in sessionsListIn) (sessionsListOut, error) {
	if in.Limit < 0 || in.Limit > 1000 {
		return sessionsListOut{}, fmt.Errorf("limit %d is outside 1..1000", in.Limit)
	}
	p, err := h.eng.Store().SessionList(ctx, &store.SessionListParams{Agent: in.Agent, ParentID: in.Parent, Query: in.Query, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return sessionsListOut{}, err
	}
	out := sessionsListOut{Sessions: p.Sessions, Next: p.Next}
	if out.Sessions == nil {
		out.Sessions = []*steptype.Session{}
	}
	return out, nil
}

type rangeIn struct {
	SessionID string `json:"session_id" jsonschema:"the session's id"`
	From      int64  `json:"from,omitempty" jsonschema:"first sequence, default 1"`
	To        int64  `json:"to,omitempty" jsonschema:"last sequence, default the session's last (at most 1000 steps from from)"`
}

// steps reads the steps of in's range, checking the session and range.
func (h *handlers) steps(ctx context.Context, in rangeIn) (*steptype.Session, []*stepwise.Step, error) {
	if in.SessionID == "" {
		return nil, nil, errors.New("session_id is required")
	}
	sess, err := h.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: in.SessionID})
	if err != nil {
		return nil, nil, err
	}
	from, to := in.From, in.To
	if from == 0 {
		from = 1
	}
	if to == 0 {
		to = sess.LastSequence
	}
	if from < 1 || to < from {
		return nil, nil, fmt.Errorf("range %d..%d is empty or invalid (session %s has steps 1..%d)", from, to, sess.ID, sess.LastSequence)
	}
	if to-from >= maxSteps {
		to = from + maxSteps - 1
	}
	steps, err := h.eng.Store().StepList(ctx, &store.StepListParams{SessionID: sess.ID, StartSeq: from, EndSeq: to})
	return sess, steps, err
}

type stepsReadOut struct {
	SessionID    string           `json:"session_id"`
	LastSequence int64            `json:"last_sequence" jsonschema:"the session's last sequence"`
	Steps        []map[string]any `json:"steps" jsonschema:"the steps, as GET /v1/sessions/{id}/steps encodes them"`
}

func (h *handlers) stepsRead(ctx context.Context, in rangeIn) (stepsReadOut, error) {
	sess, steps, err := h.steps(ctx, in)
	if err != nil {
		return stepsReadOut{}, err
	}
	out := stepsReadOut{SessionID: sess.ID, LastSequence: sess.LastSequence, Steps: make([]map[string]any, 0, len(steps))}
	for _, s := range steps {
		m, err := toMap(s)
		if err != nil {
			return stepsReadOut{}, err
		}
		out.Steps = append(out.Steps, m)
	}
	return out, nil
}

type traceOut struct {
	SessionID string `json:"session_id"`
	Trace     string `json:"trace" jsonschema:"the rendered steps, one block per step"`
}

func (h *handlers) traceRender(ctx context.Context, in rangeIn) (traceOut, error) {
	sess, steps, err := h.steps(ctx, in)
	if err != nil {
		return traceOut{}, err
	}
	return traceOut{SessionID: sess.ID, Trace: render.Steps(steps)}, nil
}

type searchIn struct {
	Query      string   `json:"query" jsonschema:"the text to find steps like"`
	K          int      `json:"k,omitempty" jsonschema:"how many steps, default 10"`
	Agent      string   `json:"agent,omitempty" jsonschema:"only steps of this agent's sessions"`
	SessionIDs []string `json:"session_ids,omitempty" jsonschema:"only steps of these sessions"`
	Kinds      []string `json:"kinds,omitempty" jsonschema:"only steps of these kinds (llm, tool, input, …)"`
}

type searchHit struct {
	Score float64        `json:"score" jsonschema:"cosine similarity to the query, in [-1, 1]"`
	Step  map[string]any `json:"step"`
}

type searchOut struct {
	Embedder string      `json:"embedder"`
	Hits     []searchHit `json:"hits"`
}

func (h *handlers) stepsSearch(ctx context.Context, in searchIn) (searchOut, error) {
	q := recall.Query{Texts: []string{in.Query}, K: in.K, Agent: in.Agent, SessionIDs: in.SessionIDs}
	if q.K == 0 {
		q.K = 10
	}
	for _, k := range in.Kinds {
		kind, err := steptype.ParseKind(k)
		if err != nil {
			return searchOut{}, err
		}
		q.Kinds = append(q.Kinds, kind)
	}
	res, err := recall.Search(ctx, h.eng.Store(), h.emb, q)
	if errors.Is(err, store.ErrNoVectors) {
		// Nothing embedded yet (or with another embedder): no hits,
		// with the reason.
		return searchOut{}, fmt.Errorf("no step is embedded with %s yet: %w", h.emb.Name(), err)
	}
	if err != nil {
		return searchOut{}, err
	}
	out := searchOut{Embedder: res.Embedder, Hits: make([]searchHit, 0, len(res.Steps))}
	for _, hit := range res.Steps {
		m, err := toMap(hit.Step)
		if err != nil {
			return searchOut{}, err
		}
		out.Hits = append(out.Hits, searchHit{Score: hit.Score, Step: m})
	}
	return out, nil
}

type inputsListIn struct {
	RunID string `json:"run_id,omitempty" jsonschema:"only this run's requests; default all runs"`
}

type inputsListOut struct {
	Inputs []*stepwise.PendingInput `json:"inputs"`
}

func (h *handlers) inputsList(ctx context.Context, in inputsListIn) (inputsListOut, error) {
	list, err := h.eng.Pending(ctx, in.RunID)
	if err != nil {
		return inputsListOut{}, err
	}
	if list == nil {
		list = []*stepwise.PendingInput{}
	}
	return inputsListOut{Inputs: list}, nil
}

type answerIn struct {
	RunID     string `json:"run_id"`
	RequestID string `json:"request_id" jsonschema:"request_id of inputs_list"`
	Answer    any    `json:"answer" jsonschema:"the answer: any JSON value matching the request's schema"`
}

type answerOut struct {
	Sequence int64          `json:"sequence" jsonschema:"the sequence of the answered input step"`
	Step     map[string]any `json:"step"`
}

func (h *handlers) inputAnswer(ctx context.Context, in answerIn) (answerOut, error) {
	if in.Answer == nil {
		return answerOut{}, errors.New(`answer is required (a JSON value; an approval takes {"approved": true})`)
	}
	raw, err := json.Marshal(in.Answer)
	if err != nil {
		return answerOut{}, err
	}
	step, err := h.eng.Answer(ctx, stepwise.AnswerParams{RunID: in.RunID, RequestID: in.RequestID, Answer: raw})
	if err != nil {
		return answerOut{}, err
	}
	m, err := toMap(step)
	if err != nil {
		return answerOut{}, err
	}
	return answerOut{Sequence: step.Sequence, Step: m}, nil
}

type runStartIn struct {
	Agent     string `json:"agent" jsonschema:"the agent's name"`
	Input     string `json:"input" jsonschema:"the user's message"`
	SessionID string `json:"session_id,omitempty" jsonschema:"continue this session; default a new one"`
	Title     string `json:"title,omitempty" jsonschema:"the new session's title"`
	// Breakpoints pause the run (docs/breakpoints.md); a pause is listed by
	// inputs_list and answered by input_answer.
	Breakpoints *stepwise.Breakpoints `json:"breakpoints,omitempty" jsonschema:"pause the run before or after steps: {before: [selector], after: [selector]}; a selector is a step name, kind, tool name or *"`
}

type runOut struct {
	Run *steptype.Run `json:"run"`
}

func (h *handlers) runStart(ctx context.Context, in runStartIn) (runOut, error) {
	if in.Agent == "" {
		return runOut{}, errors.New("agent is required")
	}
	run, err := h.eng.StartRun(ctx, stepwise.StartParams{Agent: in.Agent, Input: in.Input, SessionID: in.SessionID, Title: in.Title, Breakpoints: in.Breakpoints})
	if err != nil {
		return runOut{}, err
	}
	return runOut{Run: run}, nil
}

type runGetIn struct {
	RunID string `json:"run_id"`
}

func (h *handlers) runGet(ctx context.Context, in runGetIn) (runOut, error) {
	run, err := h.eng.Store().RunGet(ctx, &store.RunGetParams{ID: in.RunID})
	if err != nil {
		return runOut{}, err
	}
	return runOut{Run: run}, nil
}

type forkIn struct {
	SessionID string  `json:"session_id"`
	At        int64   `json:"at" jsonschema:"the fork keeps steps 1..at"`
	Edit      *string `json:"edit,omitempty" jsonschema:"new content of step at in the fork"`
	Title     string  `json:"title,omitempty"`
}

type sessionOut struct {
	Session *steptype.Session `json:"session"`
}

func (h *handlers) sessionFork(ctx context.Context, in forkIn) (sessionOut, error) {
	sess, err := h.eng.Fork(ctx, stepwise.ForkParams{SessionID: in.SessionID, At: in.At, Edit: in.Edit, Title: in.Title})
	if err != nil {
		return sessionOut{}, err
	}
	return sessionOut{Session: sess}, nil
}

type retryIn struct {
	SessionID   string `json:"session_id"`
	From        int64  `json:"from" jsonschema:"the step to make again"`
	Destructive bool   `json:"destructive,omitempty" jsonschema:"retry in the same session, dropping steps from..last"`
	Agent       string `json:"agent,omitempty" jsonschema:"the agent of the retry run; default the session's"`
}

func (h *handlers) sessionRetry(ctx context.Context, in retryIn) (runOut, error) {
	run, err := h.eng.Retry(ctx, stepwise.RetryParams{SessionID: in.SessionID, From: in.From, Destructive: in.Destructive, Agent: in.Agent})
	if err != nil {
		return runOut{}, err
	}
	return runOut{Run: run}, nil
}
