package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// LangGraph runs. A run is a Stepwise run of the thread's session; a run
// that resumes an interrupt (command.resume) continues the interrupted run,
// so it keeps its run_id; a run from an earlier checkpoint runs on an O(1)
// fork of the thread at that step (a new thread, named in the run's
// thread_id and the stream's metadata event).

type lgCommand struct {
	Resume json.RawMessage `json:"resume"`
	Update json.RawMessage `json:"update"`
	Goto   json.RawMessage `json:"goto"`
}

type lgRunRequest struct {
	AssistantID       string           `json:"assistant_id"`
	Input             json.RawMessage  `json:"input"`
	Command           *lgCommand       `json:"command"`
	Config            json.RawMessage  `json:"config"`
	Context           json.RawMessage  `json:"context"`
	Metadata          map[string]any   `json:"metadata"`
	StreamMode        json.RawMessage  `json:"stream_mode"`
	StreamSubgraphs   bool             `json:"stream_subgraphs"`
	StreamResumable   bool             `json:"stream_resumable"`
	FeedbackKeys      []string         `json:"feedback_keys"`
	InterruptBefore   json.RawMessage  `json:"interrupt_before"`
	InterruptAfter    json.RawMessage  `json:"interrupt_after"`
	Checkpoint        *lgCheckpointRef `json:"checkpoint"`
	CheckpointID      string           `json:"checkpoint_id"`
	Webhook           string           `json:"webhook"`
	MultitaskStrategy string           `json:"multitask_strategy"`
	OnCompletion      string           `json:"on_completion"`
	OnDisconnect      string           `json:"on_disconnect"`
	AfterSeconds      float64          `json:"after_seconds"`
	IfNotExists       string           `json:"if_not_exists"`
	CheckpointDuring  *bool            `json:"checkpoint_during"`
	Durability        string           `json:"durability"`
	LangsmithTracer   json.RawMessage  `json:"langsmith_tracer"`
}

func isNull(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return t == "" || t == "null"
}

// lgStarted is a run a request started (or resumed) and where its stream
// begins.
type lgStarted struct {
	run   *stepwise.Run
	sess  *stepwise.Session // the run's session (a fork for time travel)
	after stepwise.Position // the session's position before the run went on
	modes map[string]bool
}

// lgStreamModes parses stream_mode: a string or a list; default values.
func lgStreamModes(raw json.RawMessage) (map[string]bool, error) {
	var list []string
	if !isNull(raw) {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			list = []string{one}
		} else if json.Unmarshal(raw, &list) != nil {
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "stream_mode must be a string or a list of strings")
		}
	}
	return lgModeSet(list)
}

func lgModeSet(list []string) (map[string]bool, error) {
	modes := map[string]bool{}
	for _, m := range list {
		switch m {
		case "values", "updates", "messages", "messages-tuple", "custom", "events":
			modes[m] = true
		case "debug", "tasks", "checkpoints":
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "stream_mode %q is not supported; use values, updates, messages, messages-tuple, custom or events", m)
		default:
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "unknown stream_mode %q", truncate(m, 32))
		}
	}
	if len(modes) == 0 {
		modes["values"] = true
	}
	return modes, nil
}

// lgDecodeRun reads and checks a run request; unsupported options that are
// set are refused.
func (s *Server) lgDecodeRun(w http.ResponseWriter, r *http.Request) (*lgRunRequest, map[string]bool, error) {
	var req lgRunRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return nil, nil, err
	}
	bad := func(format string, args ...any) error {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, format, args...)
	}
	switch {
	case !isNull(req.InterruptBefore) || !isNull(req.InterruptAfter):
		return nil, nil, bad("interrupt_before and interrupt_after are not supported: give the agent breakpoints (docs/breakpoints.md)")
	case req.Webhook != "":
		return nil, nil, bad("webhook is not supported: stream or join the run")
	case req.AfterSeconds != 0:
		return nil, nil, bad("after_seconds is not supported")
	case len(req.FeedbackKeys) > 0:
		return nil, nil, bad("feedback_keys are not supported: annotate steps with evals (POST /v1/sessions/{id}/steps/{sequence}/evals)")
	case req.Command != nil && (!isNull(req.Command.Update) || !isNull(req.Command.Goto)):
		return nil, nil, bad("command.update and command.goto are not supported: update the state with POST /threads/{thread_id}/state; resume with command.resume")
	case req.Command != nil && isNull(req.Command.Resume):
		return nil, nil, bad("command.resume is required in a command")
	case req.Command != nil && !isNull(req.Input):
		return nil, nil, bad("send input or command, not both")
	}
	switch req.MultitaskStrategy {
	case "", "reject", "enqueue", "interrupt", "rollback":
	default:
		return nil, nil, bad("multitask_strategy must be reject, enqueue, interrupt or rollback")
	}
	switch req.IfNotExists {
	case "", "reject", "create":
	default:
		return nil, nil, bad(`if_not_exists must be "reject" or "create"`)
	}
	switch req.OnDisconnect {
	case "", "cancel", "continue":
	default:
		return nil, nil, bad(`on_disconnect must be "cancel" or "continue"`)
	}
	modes, err := lgStreamModes(req.StreamMode)
	if err != nil {
		return nil, nil, err
	}
	if req.Checkpoint != nil && req.Checkpoint.CheckpointID != "" {
		req.CheckpointID = req.Checkpoint.CheckpointID
	}
	if req.CheckpointID == "" && !isNull(req.Config) {
		var cfg struct {
			Configurable struct {
				CheckpointID string `json:"checkpoint_id"`
			} `json:"configurable"`
		}
		if json.Unmarshal(req.Config, &cfg) != nil {
			return nil, nil, bad("config must be an object")
		}
		req.CheckpointID = cfg.Configurable.CheckpointID
	}
	return &req, modes, nil
}

// lgInput splits a run's input: the text of its last human message, and
// the other keys (a state patch, or nil).
func lgInput(raw json.RawMessage) (string, json.RawMessage, error) {
	bad := func(format string, args ...any) (string, json.RawMessage, error) {
		return "", nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, format, args...)
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(raw, &in) != nil || in == nil {
		return bad(`input must be an object such as {"messages": [{"role": "user", "content": "..."}]}`)
	}
	text, found := "", false
	if msgs, ok := in["messages"]; ok {
		delete(in, "messages")
		var list []json.RawMessage
		if json.Unmarshal(msgs, &list) != nil {
			var one json.RawMessage = msgs
			list = []json.RawMessage{one}
		}
		for i, m := range list {
			var one string
			if json.Unmarshal(m, &one) == nil {
				text, found = one, true
				continue
			}
			var msg struct {
				Role    string          `json:"role"`
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m, &msg) != nil {
				return bad("input.messages[%d]: want a message object or a string", i)
			}
			switch cmpOr(msg.Type, msg.Role) {
			case "human", "user":
			default:
				return bad("input.messages[%d]: only human (user) messages can be sent; the thread holds the rest", i)
			}
			t, err := lgContentText(msg.Content)
			if err != nil {
				return bad("input.messages[%d].content: %v", i, err)
			}
			text, found = t, true
		}
	}
	if !found && len(in) == 0 {
		return bad("input holds no human message")
	}
	var patch json.RawMessage
	if len(in) > 0 {
		patch, _ = json.Marshal(in)
	}
	return text, patch, nil
}

// lgContentText is the text of a message content: a string, or content
// blocks whose text blocks are joined.
func lgContentText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", errors.New("want a string or content blocks")
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

// lgStart starts the run a request asks for: it resumes the thread's
// interrupt (command), runs from a checkpoint (on a fork), or starts a run
// on the thread after applying the multitask strategy when it is busy.
// threadless requests run on a new thread.
func (s *Server) lgStart(ctx context.Context, r *http.Request, req *lgRunRequest, modes map[string]bool) (*lgStarted, error) {
	agent, err := s.lgAgent(req.AssistantID)
	if err != nil {
		return nil, err
	}
	st := s.eng.Store()
	var sess *stepwise.Session
	created := false // a session made for this request: dropped if it is refused
	if id := r.PathValue("thread"); id == "" {
		var meta json.RawMessage
		if len(req.Metadata) > 0 {
			meta, _ = json.Marshal(req.Metadata)
		}
		if sess, err = st.SessionCreate(ctx, &store.SessionCreateParams{ID: stepwise.NewID(), Agent: agent.Name, Title: "LangGraph thread", Metadata: meta}); err != nil {
			return nil, err
		}
		created = true
	} else {
		sess, err = s.lgSession(ctx, r)
		var ae *apiError
		if err != nil && req.IfNotExists == "create" && errors.As(err, &ae) && ae.status == http.StatusNotFound {
			sess, created, err = s.threadSession(ctx, id, agent.Name, "LangGraph thread")
		}
		if err != nil {
			return nil, err
		}
	}
	started, err := s.lgStartOn(ctx, agent, sess, req, modes)
	if err != nil && created {
		s.dropThreadSession(sess.ID)
	}
	return started, err
}

// lgStartOn is lgStart on the thread's session.
func (s *Server) lgStartOn(ctx context.Context, agent *stepwise.Agent, sess *stepwise.Session, req *lgRunRequest, modes map[string]bool) (*lgStarted, error) {
	st := s.eng.Store()
	var err error
	if sess.Agent != "" && sess.Agent != agent.Name {
		return nil, errorf(http.StatusConflict, CodeConflict, "thread %s belongs to assistant %s (graph %s)", sess.ID, lgAssistantID(sess.Agent), sess.Agent)
	}
	if req.Command != nil {
		return s.lgResume(ctx, sess, req.Command.Resume, modes)
	}
	var text string
	var patch json.RawMessage
	if !isNull(req.Input) {
		if text, patch, err = lgInput(req.Input); err != nil {
			return nil, err
		}
	}
	if req.CheckpointID != "" {
		seq, err := s.lgCheckpointSeq(ctx, sess, req.CheckpointID)
		if err != nil {
			return nil, err
		}
		if seq < sess.LastSequence {
			return s.lgTimeTravel(ctx, agent, sess, seq, text, isNull(req.Input), modes)
		}
	}
	if isNull(req.Input) && sess.LastSequence == 0 {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "input is required on a thread without steps")
	}
	if err := s.lgMakeRoom(ctx, sess, req.MultitaskStrategy); err != nil {
		return nil, err
	}
	var patched *stepwise.Step
	if patch != nil {
		if patched, err = s.lgPatchState(ctx, sess, patch, "__input__"); err != nil {
			return nil, err
		}
	}
	if sess, err = st.SessionGet(ctx, &store.SessionGetParams{ID: sess.ID}); err != nil {
		return nil, err
	}
	v, err := s.lgLoad(ctx, sess, lgAll)
	if err != nil {
		return nil, err
	}
	p := stepwise.StartParams{Agent: agent.Name, SessionID: sess.ID, Input: text, Continue: isNull(req.Input)}
	if len(v.state) > 0 {
		p.State = v.state
	}
	run, err := s.eng.StartRun(ctx, p)
	if err != nil && patched != nil {
		// Refused: the input's state patch goes too.
		if _, terr := s.eng.Truncate(context.WithoutCancel(ctx), sess.ID, patched.Sequence); terr != nil {
			s.log.Warn("langgraph: drop the state patch of a refused run", "thread", sess.ID, "err", terr)
		}
	}
	if errors.Is(err, store.ErrSessionBusy) || errors.Is(err, store.ErrConflict) {
		return nil, errorf(http.StatusConflict, CodeSessionBusy, "thread %s is busy: it has an unfinished run (multitask_strategy reject)", sess.ID)
	}
	if err != nil {
		return nil, err
	}
	return &lgStarted{run: run, sess: sess, after: stepwise.Position{Seq: sess.LastSequence}, modes: modes}, nil
}

// lgMakeRoom applies the multitask strategy to a thread's unfinished run:
// reject refuses (409), interrupt cancels it, rollback cancels it and
// deletes its steps, enqueue waits until it has finished. A run waiting
// for input is superseded (cancelled) by the new run, as LangGraph drops
// an interrupt that a new input does not resume.
func (s *Server) lgMakeRoom(ctx context.Context, sess *stepwise.Session, strategy string) error {
	for {
		runs, err := s.lgRuns(ctx, sess.ID)
		if err != nil {
			return err
		}
		var busy *stepwise.Run
		for _, r := range runs {
			if !r.Status.Terminal() {
				busy = r
			}
		}
		if busy == nil {
			return nil
		}
		if busy.Status == steptype.RunWaiting && strategy != "enqueue" {
			if _, err := s.eng.Cancel(ctx, busy.ID, "superseded by a new LangGraph run"); err != nil && !errors.Is(err, stepwise.ErrRunFinished) {
				return err
			}
			continue
		}
		switch strategy {
		case "", "reject":
			return errorf(http.StatusConflict, CodeSessionBusy, "thread %s is busy: run %s is %s; wait for it, or choose multitask_strategy enqueue, interrupt or rollback", sess.ID, busy.ID, lgRunStatus(busy.Status))
		case "interrupt", "rollback":
			_, err := s.eng.Cancel(ctx, busy.ID, "interrupted by a new LangGraph run (multitask_strategy "+strategy+")")
			if errors.Is(err, stepwise.ErrRunFinished) {
				continue // it finished first: nothing to interrupt or roll back
			}
			if err != nil {
				return err
			}
			if strategy == "rollback" {
				if err := s.lgRollback(ctx, busy); err != nil {
					return err
				}
			}
		case "enqueue":
			if busy.Status == steptype.RunWaiting {
				if _, err := s.eng.Cancel(ctx, busy.ID, "superseded by an enqueued LangGraph run"); err != nil && !errors.Is(err, stepwise.ErrRunFinished) {
					return err
				}
				continue
			}
			if _, err := s.lgSettle(ctx, busy.ID, stepwise.Position{Seq: sess.LastSequence}); err != nil {
				return err
			}
		}
	}
}

// lgRollback deletes the steps a cancelled run wrote.
func (s *Server) lgRollback(ctx context.Context, run *stepwise.Run) error {
	steps, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: run.SessionID, RunID: run.ID, Limit: 1})
	if err != nil || len(steps) == 0 {
		return err
	}
	_, err = s.eng.Truncate(ctx, run.SessionID, steps[0].Sequence)
	return err
}

// lgSettle waits until a run finished or parked on a request made after
// position after (a2aSettle's wait).
func (s *Server) lgSettle(ctx context.Context, runID string, after stepwise.Position) (*stepwise.Run, error) {
	return s.a2aSettle(ctx, runID, after)
}

// lgResume answers the thread's pending requests with resume: a value for
// the only (or oldest) one, or an object {interrupt_id: value} naming them.
func (s *Server) lgResume(ctx context.Context, sess *stepwise.Session, resume json.RawMessage, modes map[string]bool) (*lgStarted, error) {
	pending, err := s.sessionPending(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	list := sortedPending(pending)
	if len(list) == 0 {
		return nil, errorf(http.StatusConflict, CodeNotWaiting, "thread %s has no interrupt to resume", sess.ID)
	}
	answers := map[string]json.RawMessage{}
	var byID map[string]json.RawMessage
	if json.Unmarshal(resume, &byID) == nil && len(byID) > 0 {
		all := true
		for id := range byID {
			all = all && pending[id] != nil
		}
		if all {
			answers = byID
		}
	}
	if len(answers) == 0 {
		answers[list[0].RequestID] = resume
	}
	// Check every answer before giving any.
	for id, a := range answers {
		if _, err := lgAnswer(pending[id], a); err != nil {
			return nil, err
		}
	}
	after := stepwise.Position{Seq: sess.LastSequence}
	var runID string
	for _, p := range list {
		a, ok := answers[p.RequestID]
		if !ok {
			continue
		}
		ans, _ := lgAnswer(p, a)
		if _, err := s.eng.Answer(ctx, stepwise.AnswerParams{RunID: p.RunID, RequestID: p.RequestID, Answer: ans}); err != nil {
			return nil, err
		}
		runID = p.RunID
	}
	run, err := s.eng.Store().RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, err
	}
	for run.Hop > 0 && run.ParentRunID != "" {
		if run, err = s.eng.Store().RunGet(ctx, &store.RunGetParams{ID: run.ParentRunID}); err != nil {
			return nil, err
		}
	}
	return &lgStarted{run: run, sess: sess, after: after, modes: modes}, nil
}

// lgAnswer turns a resume value into the answer of a request: an approval
// takes true/false, "yes"/"no …" or {"approved": …}; any other request the
// value itself.
func lgAnswer(p *stepwise.PendingInput, v json.RawMessage) (json.RawMessage, error) {
	if p.Request.Approval == nil {
		return v, nil
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		if b {
			return json.RawMessage(`{"approved":true}`), nil
		}
		return json.RawMessage(`{"approved":false,"message":"rejected"}`), nil
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		a, rerr := answerOf(p, []a2aPart{textPart(text)})
		if rerr != nil {
			return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidAnswer, "%s", rerr.Message)
		}
		return a, nil
	}
	var o struct {
		Approved *bool `json:"approved"`
	}
	if json.Unmarshal(v, &o) == nil && o.Approved != nil {
		return v, nil
	}
	return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidAnswer, `interrupt %s is an approval of %s: resume with true, false, "yes", "no …" or {"approved": true|false, "message"?: "…"}`, p.RequestID, p.Request.Approval.Name)
}

// lgTimeTravel runs from the checkpoint of step seq on a fork of the thread
// there (O(1)): with input, a new turn after that step; without, the step
// after it again (Engine.Retry), so the run goes on as it did from there.
func (s *Server) lgTimeTravel(ctx context.Context, agent *stepwise.Agent, sess *stepwise.Session, seq int64, text string, noInput bool, modes map[string]bool) (*lgStarted, error) {
	var run *stepwise.Run
	var err error
	if noInput {
		run, err = s.eng.Retry(ctx, stepwise.RetryParams{SessionID: sess.ID, From: seq + 1, Agent: agent.Name})
	} else {
		var fork *stepwise.Session
		if fork, err = s.eng.Fork(ctx, stepwise.ForkParams{SessionID: sess.ID, At: seq}); err == nil {
			var v *lgView
			if v, err = s.lgLoad(ctx, fork, lgAll); err == nil {
				p := stepwise.StartParams{Agent: agent.Name, SessionID: fork.ID, Input: text}
				if len(v.state) > 0 {
					p.State = v.state
				}
				run, err = s.eng.StartRun(ctx, p)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	fork, err := s.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		return nil, err
	}
	// The fork shares the steps up to seq; the run goes on from there (it
	// may have committed more already).
	return &lgStarted{run: run, sess: fork, after: stepwise.Position{Seq: seq}, modes: modes}, nil
}

// lgRunStatus is LangGraph's status of a run.
func lgRunStatus(st steptype.RunStatus) string {
	switch st {
	case steptype.RunQueued:
		return "pending"
	case steptype.RunRunning:
		return "running"
	case steptype.RunWaiting, steptype.RunCancelled:
		return "interrupted"
	case steptype.RunCompleted:
		return "success"
	case steptype.RunFailed:
		return "error"
	}
	return string(st)
}

func lgRun(run *stepwise.Run) obj {
	meta := obj{"stepwise_status": run.Status}
	if run.Error != nil {
		meta["error"] = run.Error.Message
	}
	return obj{"run_id": run.ID, "thread_id": run.SessionID, "assistant_id": lgAssistantID(run.Agent), "created_at": lgTime(run.CreatedAt),
		"updated_at": lgTime(run.UpdatedAt), "status": lgRunStatus(run.Status), "metadata": meta, "multitask_strategy": nil, "kwargs": obj{}}
}

// lgLocate sets the headers the SDK reads a run's id from
// (Content-Location) and, for a stream, reconnects to (Location, with the
// stream's modes: the SDK sends none when it reconnects), relative to the
// API root.
func lgLocate(w http.ResponseWriter, run *stepwise.Run, modes map[string]bool) {
	loc := "/threads/" + run.SessionID + "/runs/" + run.ID
	w.Header().Set("Content-Location", loc)
	if modes != nil {
		q := url.Values{}
		for _, m := range slices.Sorted(maps.Keys(modes)) {
			q.Add("stream_mode", m)
		}
		w.Header().Set("Location", loc+"/stream?"+q.Encode())
	}
}

// lgRunCreate: POST /threads/{thread}/runs, a background run.
func (s *Server) lgRunCreate(w http.ResponseWriter, r *http.Request) error {
	req, modes, err := s.lgDecodeRun(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	started, err := s.lgStart(ctx, r, req, modes)
	if err != nil {
		return err
	}
	run, err := s.eng.Store().RunGet(ctx, &store.RunGetParams{ID: started.run.ID})
	if err != nil {
		return err
	}
	lgLocate(w, run, nil)
	writeJSON(w, http.StatusOK, lgRun(run))
	return nil
}

// lgRunWait: POST /threads/{thread}/runs/wait (and /runs/wait): the run's
// final values.
func (s *Server) lgRunWait(w http.ResponseWriter, r *http.Request) error {
	req, modes, err := s.lgDecodeRun(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	started, err := s.lgStart(ctx, r, req, modes)
	if err != nil {
		return err
	}
	lgLocate(w, started.run, nil)
	return s.lgWriteFinal(ctx, w, started.run.ID, started.after)
}

// lgWriteFinal waits for a run to settle and writes the thread's values:
// with __interrupt__ when it waits for input, __error__ when it failed.
func (s *Server) lgWriteFinal(ctx context.Context, w http.ResponseWriter, runID string, after stepwise.Position) error {
	run, err := s.lgSettle(ctx, runID, after)
	if err != nil {
		return err
	}
	sess, err := s.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		return err
	}
	// The values as the run left them: up to its last step (a run started
	// after it, an enqueued one, may have added more).
	end := sess.LastSequence
	last, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: sess.ID, RunID: run.ID, Desc: true, Limit: 1})
	if err != nil {
		return err
	}
	if len(last) > 0 {
		end = last[0].Sequence
	}
	v, err := s.lgLoad(ctx, sess, end)
	if err != nil {
		return err
	}
	out := v.values()
	switch run.Status {
	case steptype.RunWaiting:
		ins, err := s.lgInterrupts(ctx, sess.ID)
		if err != nil {
			return err
		}
		out["__interrupt__"] = lgInterruptList(ins)
	case steptype.RunFailed:
		msg := "the run failed"
		if run.Error != nil {
			msg = run.Error.Message
		}
		out["__error__"] = obj{"error": "RunError", "message": msg}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// lgThreadRun reads a run of the path's thread.
func (s *Server) lgThreadRun(ctx context.Context, r *http.Request) (*stepwise.Run, error) {
	sess, err := s.lgSession(ctx, r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("run")
	if err := checkID("run_id", id); err != nil {
		return nil, err
	}
	run, err := s.eng.Store().RunGet(ctx, &store.RunGetParams{ID: id})
	if errors.Is(err, store.ErrNotFound) || (err == nil && (run.SessionID != sess.ID || run.Hop != 0)) {
		return nil, errorf(http.StatusNotFound, CodeNotFound, "run %s not found in thread %s", id, sess.ID)
	}
	return run, err
}

// lgRunGet: GET /threads/{thread}/runs/{run}.
func (s *Server) lgRunGet(w http.ResponseWriter, r *http.Request) error {
	run, err := s.lgThreadRun(r.Context(), r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, lgRun(run))
	return nil
}

// lgRunList: GET /threads/{thread}/runs?limit&offset&status, newest first.
func (s *Server) lgRunList(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1000)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 10
	}
	offset, err := queryInt(r, "offset", 0)
	if err != nil {
		return err
	}
	status := r.URL.Query().Get("status")
	runs, err := s.lgRuns(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	out := []obj{}
	for _, run := range runs {
		if status != "" && lgRunStatus(run.Status) != status {
			continue
		}
		if offset > 0 {
			offset--
			continue
		}
		if int64(len(out)) < limit {
			out = append(out, lgRun(run))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// lgRunJoin: GET /threads/{thread}/runs/{run}/join: waits for the run and
// answers the thread's values.
func (s *Server) lgRunJoin(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	run, err := s.lgThreadRun(ctx, r)
	if err != nil {
		return err
	}
	after, err := s.lgRunStart(ctx, run)
	if err != nil {
		return err
	}
	return s.lgWriteFinal(ctx, w, run.ID, after)
}

// lgRunStart is the session position before a run's first step (its
// session's last position when it has none yet).
func (s *Server) lgRunStart(ctx context.Context, run *stepwise.Run) (stepwise.Position, error) {
	steps, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: run.SessionID, RunID: run.ID, Limit: 1})
	if err != nil {
		return stepwise.Position{}, err
	}
	if len(steps) > 0 {
		return stepwise.Position{Seq: steps[0].Sequence - 1}, nil
	}
	sess, err := s.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		return stepwise.Position{}, err
	}
	return stepwise.Position{Seq: sess.LastSequence}, nil
}

// lgRunCancel: POST /threads/{thread}/runs/{run}/cancel?wait&action.
func (s *Server) lgRunCancel(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	run, err := s.lgThreadRun(ctx, r)
	if err != nil {
		return err
	}
	action := r.URL.Query().Get("action")
	if action != "" && action != "interrupt" && action != "rollback" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, `action must be "interrupt" or "rollback"`)
	}
	if wait := r.URL.Query().Get("wait"); wait != "" && wait != "0" && wait != "1" && wait != "true" && wait != "false" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, `wait must be 0 or 1`)
	}
	if run.Status.Terminal() {
		return errorf(http.StatusConflict, CodeRunFinished, "run %s has finished (%s) and cannot be cancelled", run.ID, lgRunStatus(run.Status))
	}
	if _, err := s.eng.Cancel(ctx, run.ID, "cancelled by a LangGraph client"); err != nil {
		return err
	}
	if action == "rollback" {
		if err := s.lgRollback(ctx, run); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// lgRunStream: POST /threads/{thread}/runs/stream (and /runs/stream).
func (s *Server) lgRunStream(w http.ResponseWriter, r *http.Request) error {
	req, modes, err := s.lgDecodeRun(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	started, err := s.lgStart(ctx, r, req, modes)
	if err != nil {
		return err
	}
	lgLocate(w, started.run, modes)
	// The thread as it was when the run went on (an answered request
	// included); what the run commits after that is streamed, also when it
	// is committed already.
	v, err := s.lgLoad(ctx, started.sess, started.after.Seq)
	if err != nil {
		return err
	}
	out := &lgStream{s: s, w: w, run: started.run, modes: modes, view: v}
	if err := out.start(); err != nil {
		return nil
	}
	if modes["values"] {
		out.emit("", "values", v.values())
	}
	settled := out.follow(ctx, started.after, followFrom(started.after))
	if settled == nil && r.Context().Err() != nil && s.base.Err() == nil && req.OnDisconnect == "cancel" {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_, _ = s.eng.Cancel(cctx, started.run.ID, "the LangGraph client disconnected (on_disconnect cancel)")
	}
	return nil
}

// lgRunJoinStream: GET /threads/{thread}/runs/{run}/stream: the run's
// stream from its start, or after Last-Event-ID (a reconnection).
func (s *Server) lgRunJoinStream(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	run, err := s.lgThreadRun(ctx, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var list []string
	for _, m := range q["stream_mode"] {
		if strings.HasPrefix(m, "[") {
			var l []string
			if json.Unmarshal([]byte(m), &l) != nil {
				return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "stream_mode: want a mode or a JSON list of modes")
			}
			list = append(list, l...)
		} else {
			list = append(list, strings.Split(m, ",")...)
		}
	}
	modes, err := lgModeSet(list)
	if err != nil {
		return err
	}
	after, err := streamPosition(r.Header.Get("Last-Event-ID"), "")
	if err != nil {
		return err
	}
	resumed := after != (stepwise.Position{})
	if !resumed {
		if after, err = s.lgRunStart(ctx, run); err != nil {
			return err
		}
	}
	sess, err := s.eng.Store().SessionGet(ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		return err
	}
	v, err := s.lgLoad(ctx, sess, after.Seq)
	if err != nil {
		return err
	}
	lgLocate(w, run, modes)
	out := &lgStream{s: s, w: w, run: run, modes: modes, view: v}
	if err := out.start(); err != nil {
		return nil
	}
	from := after
	if !resumed {
		if modes["values"] {
			out.emit("", "values", v.values())
		}
		from = followFrom(after)
	}
	out.follow(ctx, after, from)
	return nil
}
