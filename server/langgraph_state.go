package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// LangGraph thread state: the values of a checkpoint are the messages of
// the session's top-level steps up to it (LangChain's message format) and
// the custom state, the merge of the steps' state patches. A checkpoint is
// a step: checkpoint_id = step id.

// lgView is a thread's values as of a step, built step by step.
type lgView struct {
	thread string
	msgs   []obj
	state  json.RawMessage
	last   *stepwise.Step // the last step taken; nil for none
	prev   string         // the id of the step before last
}

// add takes the next step of the session.
func (v *lgView) add(st *stepwise.Step) {
	if v.last != nil && st.Sequence <= v.last.Sequence {
		return
	}
	if v.last != nil {
		v.prev = v.last.ID
	}
	v.last = st
	// A sub-agent's steps patch its own run's state, not the thread's.
	if st.Hop == 0 && len(st.StatePatch) > 0 && string(st.StatePatch) != "null" {
		if next, err := stepwise.MergePatch(v.state, st.StatePatch); err == nil {
			v.state = next
		}
	}
	if m := lgMessage(st); m != nil {
		v.msgs = append(v.msgs, m)
	}
}

// values is the thread's values: the custom state's keys and messages.
func (v *lgView) values() obj {
	out := obj{}
	if len(v.state) > 0 {
		var m map[string]any
		if json.Unmarshal(v.state, &m) == nil {
			for k, x := range m {
				out[k] = x
			}
		}
	}
	msgs := v.msgs
	if msgs == nil {
		msgs = []obj{}
	}
	out["messages"] = msgs
	return out
}

// lgAll asks lgLoad for every step.
const lgAll = -1

// lgLoad builds the view of a session up to sequence upTo (lgAll: every
// step).
func (s *Server) lgLoad(ctx context.Context, sess *stepwise.Session, upTo int64) (*lgView, error) {
	v := &lgView{thread: sess.ID}
	if upTo == 0 {
		return v, nil
	}
	if upTo == lgAll {
		upTo = 0 // StepList: to the end
	}
	steps, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: sess.ID, EndSeq: upTo})
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		v.add(st)
	}
	return v, nil
}

// lgMessage is a step as a LangChain message; nil for a step outside the
// top-level conversation (sub-agent steps, bookkeeping, a request not yet
// answered).
func lgMessage(st *stepwise.Step) obj {
	if st.Hop != 0 || !st.InMessageContext() || st.Status == steptype.StepWaiting {
		return nil
	}
	m := obj{"id": st.ID, "content": st.Content, "additional_kwargs": obj{}, "response_metadata": obj{}}
	switch st.Role {
	case steptype.RoleUser:
		m["type"] = "human"
	case steptype.RoleSystem:
		m["type"] = "system"
	case steptype.RoleAssistant:
		m["type"] = "ai"
		calls := []obj{}
		for _, c := range st.ToolCalls {
			calls = append(calls, obj{"name": c.Name, "args": lgArgs(c.Arguments), "id": c.ID, "type": "tool_call"})
		}
		m["tool_calls"] = calls
		m["invalid_tool_calls"] = []obj{}
		if st.Reasoning != "" {
			m["additional_kwargs"] = obj{"reasoning_content": st.Reasoning}
		}
		mt := st.Metrics
		if mt.Model != "" {
			m["response_metadata"] = obj{"model_name": mt.Model, "model_provider": mt.Provider}
		}
		if mt.InputTokens+mt.OutputTokens > 0 {
			m["usage_metadata"] = obj{"input_tokens": mt.InputTokens, "output_tokens": mt.OutputTokens, "total_tokens": mt.InputTokens + mt.OutputTokens,
				"input_token_details": obj{"cache_read": mt.CachedTokens}}
		}
	case steptype.RoleTool:
		m["type"] = "tool"
		m["tool_call_id"] = st.ToolCallID
		m["name"] = st.ToolName
		m["status"] = "success"
		if st.Status == steptype.StepFailed || st.Error != nil {
			m["status"] = "error"
		}
		if st.Content == "" && len(st.Outputs) > 0 {
			m["content"] = string(st.Outputs)
		}
	default:
		return nil
	}
	return m
}

// lgArgs is a tool call's arguments as an object ({} when they are not
// one).
func lgArgs(raw json.RawMessage) any {
	var v map[string]any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return obj{}
	}
	return v
}

// lgInterrupt is a pending request as a LangGraph interrupt.
type lgInterrupt struct {
	taskID string // the input step's id
	node   string
	obj    obj
}

// lgInterrupts lists the pending requests of a thread as interrupts, in
// order: the interrupt id is the request id, its value what answering it
// takes.
func (s *Server) lgInterrupts(ctx context.Context, sessionID string) ([]lgInterrupt, error) {
	pending, err := s.sessionPending(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var out []lgInterrupt
	for _, p := range sortedPending(pending) {
		taskID, node := p.RequestID, "tools"
		if p.Step != nil {
			taskID, node = p.Step.ID, cmpOr(p.Step.Name, node)
		}
		out = append(out, lgInterrupt{taskID: taskID, node: node,
			obj: obj{"id": p.RequestID, "value": requestData(p), "when": "during", "resumable": true, "ns": []string{node + ":" + taskID}}})
	}
	return out, nil
}

func lgInterruptList(ins []lgInterrupt) []obj {
	out := make([]obj, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.obj)
	}
	return out
}

func lgCheckpoint(thread, id string) any {
	if id == "" {
		return nil
	}
	return obj{"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": id, "checkpoint_map": nil}
}

// lgStateOf is the ThreadState of view v; next is the node that ran after
// its step (the latest state: the waiting run's next node, if any).
func lgStateOf(v *lgView, next []string, tasks []obj, interrupts []obj) obj {
	st := obj{"values": v.values(), "next": next, "tasks": tasks, "interrupts": interrupts,
		"checkpoint": lgCheckpoint(v.thread, ""), "metadata": obj{}, "created_at": nil, "parent_checkpoint": lgCheckpoint(v.thread, v.prev)}
	if v.last != nil {
		st["checkpoint"] = lgCheckpoint(v.thread, v.last.ID)
		st["created_at"] = lgTime(v.last.CreatedAt)
		writes := obj{}
		if m := lgMessage(v.last); m != nil {
			writes[cmpOr(v.last.Name, string(v.last.Kind))] = obj{"messages": []obj{m}}
		}
		st["metadata"] = obj{"source": "loop", "step": v.last.Sequence, "writes": writes, "thread_id": v.thread,
			"stepwise": obj{"sequence": v.last.Sequence, "kind": v.last.Kind, "name": v.last.Name, "run_id": v.last.RunID}}
	}
	return st
}

// lgCurrentState is the latest state of a thread, with the pending
// interrupts as tasks.
func (s *Server) lgCurrentState(ctx context.Context, sess *stepwise.Session) (obj, error) {
	v, err := s.lgLoad(ctx, sess, lgAll)
	if err != nil {
		return nil, err
	}
	ins, err := s.lgInterrupts(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	next, tasks := []string{}, []obj{}
	for _, in := range ins {
		next = append(next, in.node)
		tasks = append(tasks, obj{"id": in.taskID, "name": in.node, "error": nil, "interrupts": []obj{in.obj}, "checkpoint": nil, "state": nil})
	}
	runs, err := s.lgRuns(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if (r.Status == steptype.RunQueued || r.Status == steptype.RunRunning) && len(next) == 0 && r.Cursor != "" {
			next = append(next, r.Cursor)
		}
	}
	return lgStateOf(v, next, tasks, lgInterruptList(ins)), nil
}

// lgStateAtStep is the state of a thread at the checkpoint of step id.
func (s *Server) lgStateAtStep(ctx context.Context, sess *stepwise.Session, id string) (obj, error) {
	seq, err := s.lgCheckpointSeq(ctx, sess, id)
	if err != nil {
		return nil, err
	}
	if seq == sess.LastSequence {
		return s.lgCurrentState(ctx, sess)
	}
	v, err := s.lgLoad(ctx, sess, seq)
	if err != nil {
		return nil, err
	}
	next, err := s.eng.Store().StepGet(ctx, &store.StepGetParams{SessionID: sess.ID, Sequence: seq + 1})
	if err != nil {
		return nil, err
	}
	return lgStateOf(v, []string{cmpOr(next.Name, string(next.Kind))}, []obj{}, []obj{}), nil
}

// lgCheckpointSeq is the sequence of the step a checkpoint id names in a
// thread (its own steps or those it shares with its parent).
func (s *Server) lgCheckpointSeq(ctx context.Context, sess *stepwise.Session, id string) (int64, error) {
	if err := checkID("checkpoint_id", id); err != nil {
		return 0, err
	}
	st, err := s.eng.Store().StepGet(ctx, &store.StepGetParams{ID: id})
	if err == nil && st.Sequence <= sess.LastSequence {
		var here *stepwise.Step
		if here, err = s.eng.Store().StepGet(ctx, &store.StepGetParams{SessionID: sess.ID, Sequence: st.Sequence}); err == nil && here.ID == id {
			return st.Sequence, nil
		}
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	return 0, errorf(http.StatusNotFound, CodeNotFound, "checkpoint %s not found in thread %s", id, sess.ID)
}

// lgState: GET /threads/{thread}/state[/{checkpoint}].
func (s *Server) lgState(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	var st obj
	if id := r.PathValue("checkpoint"); id != "" {
		st, err = s.lgStateAtStep(r.Context(), sess, id)
	} else {
		st, err = s.lgCurrentState(r.Context(), sess)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// lgCheckpointRef is a checkpoint as clients name it.
type lgCheckpointRef struct {
	ThreadID      string         `json:"thread_id"`
	CheckpointNS  string         `json:"checkpoint_ns"`
	CheckpointID  string         `json:"checkpoint_id"`
	CheckpointMap map[string]any `json:"checkpoint_map"`
}

type lgStateAtRequest struct {
	Checkpoint *lgCheckpointRef `json:"checkpoint"`
	Subgraphs  bool             `json:"subgraphs"`
}

// lgStateAt: POST /threads/{thread}/state/checkpoint {checkpoint}.
func (s *Server) lgStateAt(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lgSession(r.Context(), r)
	if err != nil {
		return err
	}
	var req lgStateAtRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Checkpoint == nil || req.Checkpoint.CheckpointID == "" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "checkpoint.checkpoint_id is required")
	}
	st, err := s.lgStateAtStep(r.Context(), sess, req.Checkpoint.CheckpointID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

type lgHistoryRequest struct {
	Limit      *int             `json:"limit"`
	Before     *lgCheckpointRef `json:"before"`
	Metadata   map[string]any   `json:"metadata"`
	Checkpoint *lgCheckpointRef `json:"checkpoint"`
}

// lgHistory: POST /threads/{thread}/history {limit, before?}: one
// checkpoint per step, newest first.
func (s *Server) lgHistory(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	sess, err := s.lgSession(ctx, r)
	if err != nil {
		return err
	}
	var req lgHistoryRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	limit, err := lgLimit(req.Limit, 0)
	if err != nil {
		return err
	}
	end := sess.LastSequence
	if req.Before != nil && req.Before.CheckpointID != "" {
		seq, err := s.lgCheckpointSeq(ctx, sess, req.Before.CheckpointID)
		if err != nil {
			return err
		}
		end = seq - 1
	}
	if req.Checkpoint != nil && req.Checkpoint.CheckpointID != "" {
		seq, err := s.lgCheckpointSeq(ctx, sess, req.Checkpoint.CheckpointID)
		if err != nil {
			return err
		}
		end = min(end, seq)
	}
	out := []obj{}
	if end < 1 {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	steps, err := s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: sess.ID, EndSeq: end})
	if err != nil {
		return err
	}
	var latest obj
	if end == sess.LastSequence {
		if latest, err = s.lgCurrentState(ctx, sess); err != nil {
			return err
		}
	}
	v := &lgView{thread: sess.ID}
	states := make([]obj, 0, len(steps))
	for i, st := range steps {
		v.add(st)
		next := []string{}
		if i+1 < len(steps) {
			next = []string{cmpOr(steps[i+1].Name, string(steps[i+1].Kind))}
		}
		c := *v
		states = append(states, lgStateOf(&c, next, []obj{}, []obj{}))
	}
	if latest != nil && len(states) > 0 {
		states[len(states)-1] = latest
	}
	for i := len(states) - 1; i >= 0 && len(out) < limit; i-- {
		if metaMatches(states[i]["metadata"].(obj), req.Metadata) {
			out = append(out, states[i])
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type lgUpdateStateRequest struct {
	Values       json.RawMessage  `json:"values"`
	CheckpointID string           `json:"checkpoint_id"`
	Checkpoint   *lgCheckpointRef `json:"checkpoint"`
	AsNode       string           `json:"as_node"`
}

// lgUpdateState: POST /threads/{thread}/state {values, as_node?}: the
// values (not messages) are a state patch, recorded as a custom step that
// the next run starts from.
func (s *Server) lgUpdateState(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	sess, err := s.lgSession(ctx, r)
	if err != nil {
		return err
	}
	var req lgUpdateStateRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	cp := req.CheckpointID
	if req.Checkpoint != nil && req.Checkpoint.CheckpointID != "" {
		cp = req.Checkpoint.CheckpointID
	}
	if cp != "" {
		seq, err := s.lgCheckpointSeq(ctx, sess, cp)
		if err != nil {
			return err
		}
		if seq != sess.LastSequence {
			return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "updating the state at an earlier checkpoint is not supported: copy the thread from there with a run from that checkpoint, then update it")
		}
	}
	step, err := s.lgPatchState(ctx, sess, req.Values, cmpOr(req.AsNode, "update_state"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, obj{"checkpoint": lgCheckpoint(sess.ID, step.ID)})
	return nil
}

// lgPatchState records values (a JSON object without messages) as a state
// patch of the thread: a custom step. Refused while a run is unfinished.
func (s *Server) lgPatchState(ctx context.Context, sess *stepwise.Session, values json.RawMessage, node string) (*stepwise.Step, error) {
	var m map[string]json.RawMessage
	if t := strings.TrimSpace(string(values)); t == "" || t[0] != '{' || json.Unmarshal(values, &m) != nil {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "values must be a JSON object")
	}
	if _, ok := m["messages"]; ok {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "values.messages cannot be updated: messages are the thread's steps; send them as a run's input")
	}
	runs, err := s.lgRuns(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	if lgThreadStatus(runs) == "busy" || lgThreadStatus(runs) == "interrupted" {
		return nil, errorf(http.StatusConflict, CodeSessionBusy, "thread %s has an unfinished run; update its state when it is idle", sess.ID)
	}
	out, err := s.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: []*stepwise.Step{{
		Kind: steptype.KindCustom, Name: node, Inputs: values, StatePatch: values, Metadata: map[string]any{"langgraph": "update_state"}}}})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}
