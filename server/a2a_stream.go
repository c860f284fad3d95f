package server

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// sendStreaming answers SendStreamingMessage: the task, then its status and
// artifact updates as SSE until it completes, fails, is canceled or needs
// input.
func (x *a2aCall) sendStreaming(p *a2aSendParams) *rpcError {
	run, after, rerr := x.send(p)
	if rerr != nil {
		return rerr
	}
	var hl *int
	if p.Configuration != nil {
		hl = p.Configuration.HistoryLength
	}
	t, err := x.s.a2aTaskOf(x.ctx, run, hl)
	if err != nil {
		return rpcErrorOf(x.s, err)
	}
	if x.startStream() != nil {
		return nil
	}
	x.emit(a2aEvent{Task: t}, false)
	if run.Status == steptype.RunWaiting {
		// Requests remain after the answer: the task still needs input.
		x.final(run)
		return nil
	}
	x.follow(run, after)
	return nil
}

// subscribe answers SubscribeToTask: the task as it is, then its updates
// until it settles (a task that needs input is followed until it is
// answered, from any surface, and settles again).
func (x *a2aCall) subscribe(p *a2aTaskParams) *rpcError {
	run, rerr := x.task(p.ID)
	if rerr != nil {
		return rerr
	}
	if run.Status.Terminal() {
		return rpcErrorf(a2aUnsupportedOp, "task %s is %s (a terminal state) and cannot be subscribed to; read it with GetTask", run.ID, a2aState(run.Status))
	}
	sess, err := x.s.eng.Store().SessionGet(x.ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		return rpcErrorOf(x.s, err)
	}
	after := stepwise.Position{Seq: sess.LastSequence}
	// The run as of that position: read after the session.
	if run, err = x.s.eng.Store().RunGet(x.ctx, &store.RunGetParams{ID: run.ID}); err != nil {
		return rpcErrorOf(x.s, err)
	}
	t, err := x.s.a2aTaskOf(x.ctx, run, p.HistoryLength)
	if err != nil {
		return rpcErrorOf(x.s, err)
	}
	if x.startStream() != nil {
		return nil
	}
	x.emit(a2aEvent{Task: t}, false)
	if run.Status.Terminal() {
		x.final(run)
		return nil
	}
	x.follow(run, after)
	return nil
}

func (x *a2aCall) startStream() error {
	x.sw = newSSEWriter(x.w, x.s.cfg.WriteTimeout)
	x.started = true
	err := x.sw.start()
	if err != nil {
		x.sw = nil
	}
	return err
}

// emit writes one StreamResponse; final marks, for v0.3 clients, the last
// status update.
func (x *a2aCall) emit(ev a2aEvent, final bool) {
	if x.sw == nil {
		return
	}
	var result any = ev
	if x.legacy {
		result = legacyEvent(ev, final)
	}
	data, err := json.Marshal(a2aResponse{JSONRPC: "2.0", ID: x.id, Result: result})
	if err == nil {
		err = x.sw.event("", "", data)
	}
	if err != nil {
		x.sw = nil
	}
}

func (x *a2aCall) flush() {
	if x.sw != nil && x.sw.flush() != nil {
		x.sw = nil
	}
}

// streamError ends a stream with a JSON-RPC error response.
func (x *a2aCall) streamError(rerr *rpcError) {
	if x.sw == nil {
		return
	}
	data, _ := json.Marshal(a2aResponse{JSONRPC: "2.0", ID: x.id, Error: rerr})
	if x.sw.event("", "", data) == nil {
		x.flush()
	}
}

// final ends the stream with the task's last updates: its output artifact
// once completed, then its status.
func (x *a2aCall) final(r *stepwise.Run) {
	if r.Status == steptype.RunCompleted {
		x.emit(a2aEvent{ArtifactUpdate: &a2aArtifactUpdate{TaskID: r.ID, ContextID: r.SessionID, Artifact: outputArtifact(r), LastChunk: true}}, false)
	}
	st, err := x.s.a2aStatusOf(x.ctx, r)
	if err != nil {
		x.streamError(rpcErrorOf(x.s, err))
		return
	}
	x.emit(a2aEvent{StatusUpdate: &a2aStatusUpdate{TaskID: r.ID, ContextID: r.SessionID, Status: *st}}, true)
	x.flush()
}

// follow streams the run's progress after position after as working status
// updates (one per step started, one with the text of each model reply)
// until the run finished or parked on a request made after after; then
// final. The subscription feeds a channel read here, so that this
// goroutine alone writes; a timer checks the store (a lifecycle event may
// be missed) and sends heartbeats.
func (x *a2aCall) follow(run *stepwise.Run, after stepwise.Position) {
	s := x.s
	x.flush()
	sub, cancel := context.WithCancel(x.ctx)
	defer cancel()
	evs := make(chan *stepwise.Event, 64)
	errc := make(chan error, 1)
	go func() {
		defer close(evs)
		for ev, err := range s.eng.Subscribe(sub, stepwise.SubscribeParams{RunID: run.ID, After: followFrom(after)}) {
			if err != nil {
				errc <- err
				return
			}
			select {
			case evs <- ev:
			case <-sub.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(a2aCheckInterval)
	defer tick.Stop()
	lastWrite := time.Now()
	meta := func(step string) map[string]any {
		return map[string]any{"stepwise": map[string]any{"step": step}}
	}
	for x.sw != nil {
		check := false
		select {
		case <-x.ctx.Done():
			return
		case ev, ok := <-evs:
			switch {
			case !ok:
				evs = nil
				select {
				case err := <-errc:
					x.streamError(rpcErrorOf(s, err))
					return
				default:
				}
				check = true
			case ev.RunID != run.ID:
			case ev.Type == stepwise.EventStepStarted:
				x.emit(a2aEvent{StatusUpdate: &a2aStatusUpdate{TaskID: run.ID, ContextID: run.SessionID,
					Status: a2aStatus{State: a2aWorking, Timestamp: ev.Time.UTC().Format(time.RFC3339Nano)}, Metadata: meta(ev.StepName)}}, false)
				lastWrite = time.Now()
			case ev.Type == stepwise.EventStepCompleted:
				st := ev.Step
				if st != nil && st.Hop == 0 && st.Kind == steptype.KindLLM && st.Content != "" && st.Sequence > after.Seq {
					msg := &a2aMessage{MessageID: st.ID, ContextID: run.SessionID, TaskID: run.ID, Role: a2aRoleAgent, Parts: []a2aPart{textPart(st.Content)}}
					x.emit(a2aEvent{StatusUpdate: &a2aStatusUpdate{TaskID: run.ID, ContextID: run.SessionID,
						Status: a2aStatus{State: a2aWorking, Message: msg, Timestamp: st.CreatedAt.UTC().Format(time.RFC3339Nano)}, Metadata: meta(st.Name)}}, false)
					lastWrite = time.Now()
				}
			case ev.Type == stepwise.EventRunWaiting, ev.Type == stepwise.EventRunFinished:
				check = true
			}
		case <-tick.C:
			check = true
		}
		if check {
			r, err := s.runSettled(x.ctx, run.ID, after)
			if err != nil {
				x.streamError(rpcErrorOf(s, err))
				return
			}
			if r != nil {
				x.final(r)
				return
			}
		}
		if len(evs) == 0 {
			x.flush()
		}
		if x.sw != nil && time.Since(lastWrite) >= s.cfg.Heartbeat {
			if x.sw.comment("heartbeat") != nil {
				x.sw = nil
			}
			x.flush()
			lastWrite = time.Now()
		}
	}
}

// legacyEvent is a StreamResponse in v0.3's shape: the event itself, with
// its kind (and final on status updates).
func legacyEvent(ev a2aEvent, final bool) any {
	switch {
	case ev.Task != nil:
		return legacyResult(ev.Task)
	case ev.StatusUpdate != nil:
		m := legacyResult(ev.StatusUpdate).(map[string]any)
		m["kind"], m["final"] = "status-update", final
		return m
	case ev.ArtifactUpdate != nil:
		m := legacyResult(ev.ArtifactUpdate).(map[string]any)
		m["kind"] = "artifact-update"
		return m
	case ev.Message != nil:
		return legacyResult(ev.Message)
	}
	return map[string]any{}
}

// legacyResult rewrites a v1.0 object in v0.3's shape: kind discriminators
// on tasks, messages and parts, states and roles in lower case.
func legacyResult(v any) any {
	if ev, ok := v.(a2aEvent); ok {
		return legacyEvent(ev, false)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return legacyWalk(out)
}

func legacyWalk(v any) any {
	switch t := v.(type) {
	case []any:
		for i := range t {
			t[i] = legacyWalk(t[i])
		}
	case map[string]any:
		for k, e := range t {
			switch k {
			case "metadata", "data":
				continue // client data, kept as it is
			case "state":
				if s, ok := e.(string); ok {
					t[k] = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-")
				}
				continue
			case "role":
				if s, ok := e.(string); ok {
					t[k] = strings.ToLower(strings.TrimPrefix(s, "ROLE_"))
				}
				continue
			case "parts":
				if parts, ok := e.([]any); ok {
					for _, p := range parts {
						if pm, ok := p.(map[string]any); ok {
							switch {
							case pm["text"] != nil:
								pm["kind"] = "text"
							case pm["data"] != nil:
								pm["kind"] = "data"
							}
						}
					}
				}
			}
			t[k] = legacyWalk(e)
		}
		if t["messageId"] != nil && t["role"] != nil {
			t["kind"] = "message"
		}
		if t["id"] != nil && t["contextId"] != nil && t["status"] != nil {
			t["kind"] = "task"
		}
	}
	return v
}
