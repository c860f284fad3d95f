package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// The AG-UI endpoint: POST /v1/agui/{agent} takes an AG-UI RunAgentInput
// and streams the run as AG-UI events (SSE data lines). The thread id is
// the session id (created on first use); the last user message is the turn's
// input; a run that stops for human input ends with RUN_FINISHED whose
// outcome is an interrupt per pending request, and the next request on the
// thread answers them in its resume entries. See docs/http_api.md.

// aguiInput is AG-UI's RunAgentInput. The top level is decoded strictly;
// messages, tools, context and resume entries are open objects in AG-UI and
// are read leniently.
type aguiInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	ParentRunID     string            `json:"parentRunId,omitempty"`
	State           json.RawMessage   `json:"state,omitempty"`
	Messages        []json.RawMessage `json:"messages"`
	Tools           []json.RawMessage `json:"tools,omitempty"`
	Context         []json.RawMessage `json:"context,omitempty"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume          []json.RawMessage `json:"resume,omitempty"`
}

type aguiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type aguiContext struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

type aguiResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// agui: POST /v1/agui/{agent}.
func (s *Server) agui(w http.ResponseWriter, r *http.Request) error {
	agent, err := s.eng.Agent(r.PathValue("agent"))
	if err != nil {
		return err
	}
	var in aguiInput
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if err := checkID("threadId", in.ThreadID); err != nil {
		return err
	}
	if err := checkID("runId", in.RunID); err != nil {
		return err
	}
	resume, err := parseResume(in.Resume)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	fromTools, silent, err := s.frontendResults(ctx, &in)
	if err != nil {
		return err
	}
	if resume = append(resume, fromTools...); len(resume) > 0 {
		return s.aguiResume(ctx, w, agent, &in, resume, silent)
	}
	return s.aguiStart(ctx, w, agent, &in)
}

// aguiStart starts a run with the last user message, in the thread's
// session (created if new), and streams it.
func (s *Server) aguiStart(ctx context.Context, w http.ResponseWriter, agent *stepwise.Agent, in *aguiInput) error {
	input, err := lastUserText(in.Messages)
	if err != nil {
		return err
	}
	extra, err := contextBlock(in.Context)
	if err != nil {
		return err
	}
	title := stepwise.TitleOf(input)
	input += extra
	tools, err := clientTools(in.Tools)
	if err != nil {
		return err
	}
	var state any
	if st := strings.TrimSpace(string(in.State)); st != "" && st != "null" {
		if st[0] != '{' {
			return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "state must be a JSON object for a Stepwise agent")
		}
		state = json.RawMessage(st)
	}
	sess, created, err := s.threadSession(ctx, in.ThreadID, agent.Name, title)
	if err != nil {
		return err
	}
	after := stepwise.Position{Seq: sess.LastSequence}
	run, err := s.eng.StartRun(ctx, stepwise.StartParams{Agent: agent.Name, SessionID: sess.ID, Input: input, State: state, ClientTools: tools})
	if err != nil {
		if created {
			s.dropThreadSession(sess.ID)
		}
		if errors.Is(err, store.ErrInvalid) {
			return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "%v", err)
		}
		if errors.Is(err, store.ErrConflict) {
			return errorf(http.StatusConflict, CodeConflict, "thread %s has an unfinished run; answer its interrupts with resume or wait for it: %v", sess.ID, err)
		}
		return err
	}
	out := s.newAGUIStream(w, in, run)
	if err := out.start(); err != nil {
		return nil
	}
	s.aguiFollow(ctx, out, run, after, false)
	return nil
}

// threadSession returns the session of an AG-UI thread, creating it (then
// created is true) with title, the thread's first message's title.
func (s *Server) threadSession(ctx context.Context, threadID, agent, title string) (sess *stepwise.Session, created bool, err error) {
	st := s.eng.Store()
	sess, err = st.SessionGet(ctx, &store.SessionGetParams{ID: threadID})
	if errors.Is(err, store.ErrNotFound) {
		if title == "" {
			title = "AG-UI thread"
		}
		sess, err = st.SessionCreate(ctx, &store.SessionCreateParams{ID: threadID, Agent: agent, Title: title})
		created = err == nil
		if errors.Is(err, store.ErrConflict) { // created concurrently
			sess, err = st.SessionGet(ctx, &store.SessionGetParams{ID: threadID})
		}
	}
	if err != nil {
		return nil, false, err
	}
	if sess.Agent != "" && sess.Agent != agent {
		return nil, false, errorf(http.StatusConflict, CodeConflict, "thread %s belongs to agent %q", threadID, sess.Agent)
	}
	return sess, created, nil
}

// dropThreadSession deletes the session a refused request created, so that
// a refusal leaves nothing behind; one that a concurrent request of the
// thread has started using (a step or a run) stays.
func (s *Server) dropThreadSession(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := s.eng.Store()
	sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: id})
	if err != nil || sess.LastSequence > 0 {
		return
	}
	if runs, err := st.RunList(ctx, &store.RunListParams{SessionID: id}); err != nil || len(runs) > 0 {
		return
	}
	if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: id}); err != nil {
		s.log.Warn("agui: drop the session of a refused request", "session", id, "err", err)
	}
}

// aguiResume answers the pending requests named by the resume entries, then
// streams the run from where it parked. Entries in silent answer frontend
// tool calls: the client has their tool messages already, so no
// TOOL_CALL_RESULT is sent for them.
func (s *Server) aguiResume(ctx context.Context, w http.ResponseWriter, agent *stepwise.Agent, in *aguiInput, resume []aguiResume, silent map[string]bool) error {
	st := s.eng.Store()
	sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: in.ThreadID})
	if err != nil {
		return fmt.Errorf("thread %q: %w", in.ThreadID, err)
	}
	if sess.Agent != "" && sess.Agent != agent.Name {
		return errorf(http.StatusConflict, CodeConflict, "thread %s belongs to agent %q", sess.ID, sess.Agent)
	}
	runs, err := st.RunList(ctx, &store.RunListParams{SessionID: sess.ID, Statuses: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting}})
	if err != nil {
		return err
	}
	var run *stepwise.Run
	for _, rr := range runs {
		if rr.Hop == 0 {
			run = rr
		}
	}
	if run == nil {
		return errorf(http.StatusConflict, CodeNotWaiting, "thread %s has no interrupted run to resume", sess.ID)
	}
	after := stepwise.Position{Seq: sess.LastSequence}
	out := s.newAGUIStream(w, in, run)
	if err := out.start(); err != nil {
		return nil
	}
	pending, err := s.sessionPending(ctx, sess.ID)
	if err != nil {
		out.runError(err)
		return nil
	}
	// Check every entry before answering any.
	for _, e := range resume {
		if pending[e.InterruptID] == nil {
			out.runError(errorf(http.StatusConflict, CodeAlreadyAnswered, "interrupt %q is not pending on thread %s (unknown, answered or expired)", e.InterruptID, sess.ID))
			return nil
		}
	}
	var answered []*stepwise.Step
	for _, e := range resume {
		p := pending[e.InterruptID]
		answer := e.Payload
		if e.Status == "cancelled" {
			if p.Request.Approval == nil {
				if _, err := s.eng.Cancel(ctx, p.RunID, "interrupt "+p.RequestID+" cancelled"); err != nil {
					out.runError(err)
					return nil
				}
				continue
			}
			answer = json.RawMessage(`{"approved":false,"message":"cancelled by the user"}`)
		}
		if len(answer) == 0 {
			answer = json.RawMessage("null")
		}
		step, err := s.eng.Answer(ctx, stepwise.AnswerParams{RunID: p.RunID, RequestID: p.RequestID, Answer: answer})
		if err != nil {
			out.runError(err)
			return nil
		}
		if silent[p.RequestID] {
			out.t.lastSeq = max(out.t.lastSeq, step.Sequence)
			continue
		}
		answered = append(answered, step)
	}
	cur, err := st.RunGet(ctx, &store.RunGetParams{ID: run.ID})
	if err != nil {
		out.runError(err)
		return nil
	}
	out.t.state = cur.State
	if cur.Status == steptype.RunWaiting {
		// Requests remain: report them again.
		for _, step := range answered {
			out.t.answered(step)
		}
		out.interrupt(ctx, s)
		return nil
	}
	for _, step := range answered {
		out.t.answered(step)
	}
	s.aguiFollow(ctx, out, cur, after, true)
	return nil
}

// followFrom is where an AG-UI stream subscribes to a run that (re)started
// after the session position after: (after.Seq, 1), the position of the
// run_started event of an execution that acquires the session at after.Seq.
// The engine's in-memory ring then covers the subscription whenever the
// execution is live, so deltas are streamed even when the subscription
// comes after the first commits; a run that already ended is replayed
// from the store.
func followFrom(after stepwise.Position) stepwise.Position {
	return stepwise.Position{Seq: after.Seq, Idx: 1}
}

// sessionPending lists the pending requests of a session's waiting runs.
func (s *Server) sessionPending(ctx context.Context, sessionID string) (map[string]*stepwise.PendingInput, error) {
	runs, err := s.eng.Store().RunList(ctx, &store.RunListParams{SessionID: sessionID, Statuses: []steptype.RunStatus{steptype.RunWaiting}})
	if err != nil {
		return nil, err
	}
	out := map[string]*stepwise.PendingInput{}
	for _, r := range runs {
		list, err := s.eng.Pending(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		for _, p := range list {
			out[p.RequestID] = p
		}
	}
	return out, nil
}

func parseResume(raw []json.RawMessage) ([]aguiResume, error) {
	out := make([]aguiResume, 0, len(raw))
	seen := map[string]bool{}
	for i, b := range raw {
		var e aguiResume
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "resume[%d]: %s", i, trimJSONPrefix(err))
		}
		if e.InterruptID == "" || (e.Status != "resolved" && e.Status != "cancelled") {
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, `resume[%d]: want {"interruptId": "...", "status": "resolved"|"cancelled", "payload"?: ...}`, i)
		}
		if seen[e.InterruptID] {
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "resume[%d]: interrupt %q answered twice", i, e.InterruptID)
		}
		seen[e.InterruptID] = true
		out = append(out, e)
	}
	return out, nil
}

// lastUserText is the text of the last user message.
func lastUserText(msgs []json.RawMessage) (string, error) {
	for i := len(msgs) - 1; i >= 0; i-- {
		var m aguiMessage
		if err := json.Unmarshal(msgs[i], &m); err != nil {
			return "", errorf(http.StatusBadRequest, CodeInvalidJSON, "messages[%d]: %s", i, trimJSONPrefix(err))
		}
		if m.Role != "user" {
			continue
		}
		var text string
		if err := json.Unmarshal(m.Content, &text); err == nil {
			return text, nil
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "messages[%d].content: want a string or content parts", i)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(p.Text)
			}
		}
		return b.String(), nil
	}
	return "", errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "messages holds no user message to run on (and resume is empty)")
}

// contextBlock renders AG-UI context entries for the model, appended to the
// user message of the turn.
func contextBlock(raw []json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("\n\n<context>")
	for i, c := range raw {
		var e aguiContext
		if err := json.Unmarshal(c, &e); err != nil {
			return "", errorf(http.StatusBadRequest, CodeInvalidJSON, "context[%d]: %s", i, trimJSONPrefix(err))
		}
		fmt.Fprintf(&b, "\n%s: %s", e.Description, e.Value)
	}
	b.WriteString("\n</context>")
	return b.String(), nil
}
