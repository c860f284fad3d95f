package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// a2aCheckInterval is how often a blocking or streaming call checks the
// run's status in the store, in case a lifecycle event was missed.
const a2aCheckInterval = 500 * time.Millisecond

// sendMessage answers SendMessage: it starts or continues the task, then
// (unless returnImmediately) waits until it completes, fails, is canceled
// or needs input, and returns it.
func (x *a2aCall) sendMessage(p *a2aSendParams) (any, *rpcError) {
	run, after, rerr := x.send(p)
	if rerr != nil {
		return nil, rerr
	}
	cfg := p.Configuration
	if cfg == nil || (!cfg.ReturnImmediately && (cfg.Blocking == nil || *cfg.Blocking)) {
		if run.Status != steptype.RunWaiting {
			settled, err := x.s.a2aSettle(x.ctx, run.ID, after)
			if err != nil {
				return nil, rpcErrorOf(x.s, err)
			}
			run = settled
		}
	} else if r, err := x.s.eng.Store().RunGet(x.ctx, &store.RunGetParams{ID: run.ID}); err == nil {
		run = r
	}
	var hl *int
	if cfg != nil {
		hl = cfg.HistoryLength
	}
	t, err := x.s.a2aTaskOf(x.ctx, run, hl)
	if err != nil {
		return nil, rpcErrorOf(x.s, err)
	}
	if x.legacy {
		return t, nil
	}
	return a2aEvent{Task: t}, nil
}

// send starts a run with the message, or answers the pending request of
// the task it names. after is the session position before; run is the
// run's state once the message is taken (waiting when requests remain).
func (x *a2aCall) send(p *a2aSendParams) (*stepwise.Run, stepwise.Position, *rpcError) {
	m := p.Message
	if m == nil {
		return nil, stepwise.Position{}, rpcErrorf(rpcInvalidParams, "params.message is required")
	}
	if m.MessageID == "" {
		return nil, stepwise.Position{}, rpcErrorf(rpcInvalidParams, "message.messageId is required")
	}
	if m.Role != a2aRoleUser && m.Role != "user" {
		return nil, stepwise.Position{}, rpcErrorf(rpcInvalidParams, "message.role must be %s, got %q", a2aRoleUser, m.Role)
	}
	if len(m.Parts) == 0 {
		return nil, stepwise.Position{}, rpcErrorf(rpcInvalidParams, "message.parts is empty")
	}
	for i, part := range m.Parts {
		if part.Raw != "" || part.URL != "" || len(part.File) > 0 || part.Kind == "file" {
			return nil, stepwise.Position{}, rpcErrorf(a2aContentTypeNotSupp, "message.parts[%d]: file parts are not supported; send text or data parts", i)
		}
		if part.Text == nil && len(part.Data) == 0 {
			return nil, stepwise.Position{}, rpcErrorf(rpcInvalidParams, "message.parts[%d] has no content (text or data)", i)
		}
	}
	if cfg := p.Configuration; cfg != nil && (len(cfg.TaskPushNotificationConfig) > 0 || len(cfg.PushNotificationConfig) > 0) {
		return nil, stepwise.Position{}, rpcErrorf(a2aPushNotSupported, "push notifications are not supported")
	}
	if m.TaskID != "" {
		return x.answer(m)
	}
	return x.start(m)
}

// start starts a run in the message's context (a new session when none).
func (x *a2aCall) start(m *a2aMessage) (*stepwise.Run, stepwise.Position, *rpcError) {
	s := x.s
	input := partsText(m.Parts)
	sp := stepwise.StartParams{Agent: x.agent.Name, Input: input}
	var after stepwise.Position
	// A message without a context opens one whose id derives from the
	// message id: the same message sent again (a client's retry after a
	// lost response or a crash) finds its task instead of starting another.
	contextID, derived := m.ContextID, false
	if contextID == "" {
		sum := sha256.Sum256([]byte(x.agent.Name + "\x00" + m.MessageID))
		contextID, derived = "a2a-"+hex.EncodeToString(sum[:16]), true
	}
	if err := checkID("contextId", contextID); err != nil {
		return nil, after, rpcErrorOf(s, err)
	}
	title := stepwise.TitleOf(input)
	if title == "" {
		title = "A2A context"
	}
	sess, created, err := s.threadSession(x.ctx, contextID, x.agent.Name, title)
	if err != nil {
		if errors.Is(err, store.ErrConflict) || strings.Contains(err.Error(), "belongs to agent") {
			return nil, after, rpcErrorf(rpcInvalidParams, "contextId %s belongs to another agent", contextID)
		}
		return nil, after, rpcErrorOf(s, err)
	}
	if derived && !created {
		if run, err := s.firstRun(x.ctx, sess.ID); err != nil || run != nil {
			if err != nil {
				return nil, after, rpcErrorOf(s, err)
			}
			return run, after, nil // the task of this message, sent before
		}
	}
	sp.SessionID, after = sess.ID, stepwise.Position{Seq: sess.LastSequence}
	run, err := s.eng.StartRun(x.ctx, sp)
	if err != nil {
		if created {
			s.dropThreadSession(sp.SessionID)
		}
		if derived && errors.Is(err, store.ErrSessionBusy) {
			// The same message, sent concurrently, started it.
			if run, ferr := s.firstRun(x.ctx, sess.ID); ferr == nil && run != nil {
				return run, stepwise.Position{}, nil
			}
		}
		if errors.Is(err, store.ErrSessionBusy) {
			return nil, after, rpcErrorf(a2aUnsupportedOp, "context %s has an unfinished task; answer it with a message naming its taskId, or cancel it: %v", m.ContextID, err)
		}
		return nil, after, rpcErrorOf(s, err)
	}
	return run, after, nil
}

// firstRun is the oldest top-level run of a session; nil when it has none.
func (s *Server) firstRun(ctx context.Context, sessionID string) (*stepwise.Run, error) {
	runs, err := s.eng.Store().RunList(ctx, &store.RunListParams{SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	var first *stepwise.Run
	for _, r := range runs {
		if r.Hop == 0 && (first == nil || r.CreatedAt.Before(first.CreatedAt) || (r.CreatedAt.Equal(first.CreatedAt) && r.ID < first.ID)) {
			first = r
		}
	}
	return first, nil
}

// answer answers the task's pending request (the one named by the
// message's metadata stepwise.request_id, else the oldest) with the
// message.
func (x *a2aCall) answer(m *a2aMessage) (*stepwise.Run, stepwise.Position, *rpcError) {
	s := x.s
	st := s.eng.Store()
	run, rerr := x.task(m.TaskID)
	if rerr != nil {
		return nil, stepwise.Position{}, rerr
	}
	if m.ContextID != "" && m.ContextID != run.SessionID {
		return nil, stepwise.Position{}, rpcErrorf(rpcInvalidParams, "contextId %s is not the context of task %s (%s)", m.ContextID, run.ID, run.SessionID)
	}
	if run.Status.Terminal() {
		return nil, stepwise.Position{}, rpcErrorf(a2aUnsupportedOp, "task %s is %s (a terminal state) and takes no more messages; send a message without taskId (same contextId) to start a new task", run.ID, a2aState(run.Status))
	}
	if run.Status != steptype.RunWaiting {
		return nil, stepwise.Position{}, rpcErrorf(a2aUnsupportedOp, "task %s is %s, not %s: it takes a message only when it asks for input", run.ID, a2aState(run.Status), a2aInputRequired)
	}
	sess, err := st.SessionGet(x.ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		return nil, stepwise.Position{}, rpcErrorOf(s, err)
	}
	after := stepwise.Position{Seq: sess.LastSequence}
	pending, err := s.sessionPending(x.ctx, run.SessionID)
	if err != nil {
		return nil, after, rpcErrorOf(s, err)
	}
	list := sortedPending(pending)
	if len(list) == 0 {
		return nil, after, rpcErrorf(a2aUnsupportedOp, "task %s has no pending input request", run.ID)
	}
	target := list[0]
	if want := requestIDOf(m.Metadata); want != "" {
		if target = pending[want]; target == nil {
			return nil, after, rpcErrorf(rpcInvalidParams, "input request %q is not pending on task %s", want, run.ID)
		}
	}
	answer, rerr := answerOf(target, m.Parts)
	if rerr != nil {
		return nil, after, rerr
	}
	if _, err := s.eng.Answer(x.ctx, stepwise.AnswerParams{RunID: target.RunID, RequestID: target.RequestID, Answer: answer}); err != nil {
		return nil, after, rpcErrorOf(s, err)
	}
	cur, err := st.RunGet(x.ctx, &store.RunGetParams{ID: run.ID})
	if err != nil {
		return nil, after, rpcErrorOf(s, err)
	}
	return cur, after, nil
}

// task returns the run of a task of this endpoint's agent.
func (x *a2aCall) task(id string) (*stepwise.Run, *rpcError) {
	if id == "" {
		return nil, rpcErrorf(rpcInvalidParams, "a task id is required")
	}
	run, err := x.s.eng.Store().RunGet(x.ctx, &store.RunGetParams{ID: id})
	if errors.Is(err, store.ErrNotFound) || (err == nil && (run.Agent != x.agent.Name || run.Hop != 0)) {
		return nil, rpcErrorf(a2aTaskNotFound, "task %s not found", id)
	}
	if err != nil {
		return nil, rpcErrorOf(x.s, err)
	}
	return run, nil
}

func requestIDOf(meta map[string]any) string {
	sw, _ := meta["stepwise"].(map[string]any)
	id, _ := sw["request_id"].(string)
	return id
}

// partsText is the text of a message: its text parts, then its data parts
// as JSON, one per line.
func partsText(parts []a2aPart) string {
	var b strings.Builder
	for _, p := range parts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if p.Text != nil {
			b.WriteString(*p.Text)
		} else {
			b.Write(p.Data)
		}
	}
	return b.String()
}

// answerOf turns a message into the answer of a request: a data part is
// the answer itself; text answers a free-text request as a string, a
// request with a schema as the JSON it holds, and an approval with yes or
// no (anything else after no is the reason).
func answerOf(p *stepwise.PendingInput, parts []a2aPart) (json.RawMessage, *rpcError) {
	for _, part := range parts {
		if len(part.Data) > 0 {
			return part.Data, nil
		}
	}
	text := strings.TrimSpace(partsText(parts))
	req := p.Request
	if req.Approval != nil {
		word, rest, _ := strings.Cut(text, " ")
		switch strings.ToLower(strings.Trim(word, ".,!;:")) {
		case "yes", "y", "approve", "approved", "ok":
			return json.RawMessage(`{"approved":true}`), nil
		case "no", "n", "deny", "denied", "reject", "rejected":
			out, _ := json.Marshal(map[string]any{"approved": false, "message": cmpOr(strings.TrimSpace(rest), "rejected")})
			return out, nil
		}
		return nil, rpcErrorf(rpcInvalidParams, `input request %s is an approval of %s: answer "yes" or "no …", or a data part {"approved": true|false, "message"?: "…"}`, p.RequestID, req.Approval.Name)
	}
	if len(req.Schema) > 0 && req.Schema[0] == '{' && !isStringSchema(req.Schema) {
		if json.Valid([]byte(text)) {
			return json.RawMessage(text), nil
		}
		return nil, rpcErrorf(rpcInvalidParams, "input request %s wants a JSON value valid under its schema: send it as a data part (or as JSON text)", p.RequestID)
	}
	out, _ := json.Marshal(text)
	return out, nil
}

func isStringSchema(schema json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(schema, &s) == nil && s.Type == "string"
}

// a2aSettle waits until the run finished or parked on a request made
// after position after, and returns it.
func (s *Server) a2aSettle(ctx context.Context, runID string, after stepwise.Position) (*stepwise.Run, error) {
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	poke := make(chan struct{}, 1)
	go func() {
		for ev, err := range s.eng.Subscribe(sub, stepwise.SubscribeParams{RunID: runID, After: followFrom(after)}) {
			if err != nil {
				return
			}
			if ev.RunID == runID && (ev.Type == stepwise.EventRunWaiting || ev.Type == stepwise.EventRunFinished) {
				select {
				case poke <- struct{}{}:
				default:
				}
			}
		}
	}()
	tick := time.NewTicker(a2aCheckInterval)
	defer tick.Stop()
	for {
		r, err := s.runSettled(ctx, runID, after)
		if err != nil || r != nil {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-poke:
		case <-tick.C:
		}
	}
}

// getTask answers GetTask.
func (x *a2aCall) getTask(p *a2aTaskParams) (any, *rpcError) {
	run, rerr := x.task(p.ID)
	if rerr != nil {
		return nil, rerr
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, rpcErrorf(rpcInvalidParams, "historyLength must not be negative")
	}
	t, err := x.s.a2aTaskOf(x.ctx, run, p.HistoryLength)
	if err != nil {
		return nil, rpcErrorOf(x.s, err)
	}
	return t, nil
}

// cancelTask answers CancelTask.
func (x *a2aCall) cancelTask(p *a2aTaskParams) (any, *rpcError) {
	run, rerr := x.task(p.ID)
	if rerr != nil {
		return nil, rerr
	}
	if run.Status.Terminal() {
		return nil, rpcErrorf(a2aTaskNotCancelable, "task %s is %s and cannot be canceled", run.ID, a2aState(run.Status))
	}
	r, err := x.s.eng.Cancel(x.ctx, run.ID, "canceled by an A2A client")
	if errors.Is(err, stepwise.ErrRunFinished) {
		return nil, rpcErrorf(a2aTaskNotCancelable, "task %s finished before it could be canceled", run.ID)
	}
	if err != nil {
		return nil, rpcErrorOf(x.s, err)
	}
	t, err := x.s.a2aTaskOf(x.ctx, r, nil)
	if err != nil {
		return nil, rpcErrorOf(x.s, err)
	}
	return t, nil
}

// a2aState is the A2A state of a run status.
func a2aState(st steptype.RunStatus) string {
	switch st {
	case steptype.RunQueued:
		return a2aSubmitted
	case steptype.RunWaiting:
		return a2aInputRequired
	case steptype.RunCompleted:
		return a2aCompleted
	case steptype.RunFailed:
		return a2aFailed
	case steptype.RunCancelled:
		return a2aCanceled
	}
	return a2aWorking
}

func textPart(s string) a2aPart { return a2aPart{Text: &s} }

// a2aTaskOf builds the task of a run: its status, its output artifact once
// completed, and its history (the last historyLength messages; all when
// nil).
func (s *Server) a2aTaskOf(ctx context.Context, run *stepwise.Run, historyLength *int) (*a2aTask, error) {
	status, err := s.a2aStatusOf(ctx, run)
	if err != nil {
		return nil, err
	}
	t := &a2aTask{ID: run.ID, ContextID: run.SessionID, Status: *status,
		Metadata: map[string]any{"stepwise": map[string]any{"run_id": run.ID, "session_id": run.SessionID, "agent": run.Agent}}}
	if run.Status == steptype.RunCompleted {
		t.Artifacts = []a2aArtifact{outputArtifact(run)}
	}
	if historyLength != nil && *historyLength == 0 {
		return t, nil
	}
	steps, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: run.SessionID, RunID: run.ID})
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		if st.Hop != 0 {
			continue
		}
		switch {
		case st.Kind == steptype.KindUser:
			t.History = append(t.History, a2aMessage{MessageID: st.ID, ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleUser, Parts: []a2aPart{textPart(st.Content)}})
		case st.Kind == steptype.KindLLM && st.Content != "":
			t.History = append(t.History, a2aMessage{MessageID: st.ID, ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleAgent, Parts: []a2aPart{textPart(st.Content)}})
		case st.Kind == steptype.KindInput && st.Status == steptype.StepCompleted:
			var req stepwise.InputRequest
			_ = json.Unmarshal(st.Inputs, &req)
			t.History = append(t.History,
				a2aMessage{MessageID: st.ID + "-request", ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleAgent, Parts: []a2aPart{textPart(promptOf(&req))}},
				a2aMessage{MessageID: st.ID + "-answer", ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleUser, Parts: []a2aPart{answerPart(st.Outputs)}})
		}
	}
	if historyLength != nil && len(t.History) > *historyLength {
		t.History = t.History[len(t.History)-*historyLength:]
	}
	return t, nil
}

func promptOf(req *stepwise.InputRequest) string {
	if req.Prompt != "" {
		return req.Prompt
	}
	if req.Approval != nil {
		return "Approve the call of " + req.Approval.Name + "?"
	}
	return "Input required"
}

// answerPart is an answer as a message part: a string as text, any other
// JSON value as data.
func answerPart(raw json.RawMessage) a2aPart {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return textPart(s)
	}
	if len(raw) == 0 {
		return textPart("")
	}
	return a2aPart{Data: raw, MediaType: "application/json"}
}

func outputArtifact(run *stepwise.Run) a2aArtifact {
	return a2aArtifact{ArtifactID: "output", Name: "output", Description: "the final output of the run", Parts: []a2aPart{textPart(run.Output)}}
}

// a2aStatusOf is the status of a run's task; an input-required status
// carries the pending request as an agent message: its prompt as text and,
// as data, what answering it takes.
func (s *Server) a2aStatusOf(ctx context.Context, run *stepwise.Run) (*a2aStatus, error) {
	st := &a2aStatus{State: a2aState(run.Status), Timestamp: run.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	switch run.Status {
	case steptype.RunWaiting:
		pending, err := s.sessionPending(ctx, run.SessionID)
		if err != nil {
			return nil, err
		}
		list := sortedPending(pending)
		if len(list) == 0 {
			return st, nil
		}
		var parts []a2aPart
		for _, p := range list {
			parts = append(parts, textPart(promptOf(p.Request)))
		}
		var reqs []any
		for _, p := range list {
			reqs = append(reqs, requestData(p))
		}
		data, _ := json.Marshal(map[string]any{"stepwise": map[string]any{"requests": reqs}})
		parts = append(parts, a2aPart{Data: data, MediaType: "application/json"})
		st.Message = &a2aMessage{MessageID: list[0].RequestID, ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleAgent, Parts: parts}
	case steptype.RunFailed:
		msg := "the run failed"
		if run.Error != nil {
			msg = run.Error.Message
		}
		st.Message = &a2aMessage{MessageID: run.ID + "-error", ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleAgent, Parts: []a2aPart{textPart(msg)}}
	case steptype.RunCompleted:
		st.Message = &a2aMessage{MessageID: run.ID + "-output", ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleAgent, Parts: []a2aPart{textPart(run.Output)}}
	}
	return st, nil
}

// requestData describes a pending request for the client: its id (to name
// it in metadata.stepwise.request_id when several are pending), its kind,
// its schema or the tool call to approve.
func requestData(p *stepwise.PendingInput) map[string]any {
	req := p.Request
	d := map[string]any{"request_id": p.RequestID, "kind": "input", "prompt": promptOf(req)}
	if req.Approval != nil {
		d["kind"] = "approval"
		d["tool"] = map[string]any{"name": req.Approval.Name, "arguments": req.Approval.Arguments}
	}
	if len(req.Schema) > 0 {
		d["schema"] = req.Schema
	}
	if !req.ExpiresAt.IsZero() {
		d["expires_at"] = req.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return d
}
