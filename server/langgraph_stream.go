package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// lgStream writes a run's events as LangGraph's SSE: event: <mode>, data:
// <json>; the first is metadata {run_id, thread_id}; each event made from
// an engine event has its position as id, so a reconnecting client
// (Last-Event-ID) resumes after it.
type lgStream struct {
	s     *Server
	w     http.ResponseWriter
	run   *stepwise.Run
	modes map[string]bool
	view  *lgView
	sw    *sseWriter
	// partial is the streamed text of the model call in flight (messages
	// mode), keyed by the id its chunks carry.
	partial map[string]string
	// chunked is set when the model call in flight streamed text; resets
	// counts the voided attempts of the stream's model calls.
	chunked   bool
	resets    int
	lastWrite time.Time
	// text and chunkID are the content the chunks of the model call in
	// flight carried and their message id: deltas are best effort, so the
	// step's completion sends what they missed.
	text    strings.Builder
	chunkID string
}

func (o *lgStream) start() error {
	o.sw = newSSEWriter(o.w, o.s.cfg.WriteTimeout)
	// No retry hint and no blank line outside events: the SDK's decoder
	// yields an empty event for either.
	if err := o.sw.startWith(": langgraph\n"); err != nil {
		o.sw = nil
		return err
	}
	o.emit("", "metadata", obj{"run_id": o.run.ID, "thread_id": o.run.SessionID, "attempt": 1})
	o.flush()
	return nil
}

// emit writes one event; a write error ends the stream.
func (o *lgStream) emit(id, event string, data any) {
	if o.sw == nil {
		return
	}
	b, err := json.Marshal(data)
	if err == nil {
		err = o.sw.event(id, event, b)
	}
	if err != nil {
		o.sw = nil
	}
	o.lastWrite = time.Now()
}

func (o *lgStream) flush() {
	if o.sw != nil && o.sw.flush() != nil {
		o.sw = nil
	}
}

func (o *lgStream) meta(node string, seq int64) obj {
	return obj{"langgraph_node": node, "langgraph_step": seq, "run_id": o.run.ID, "thread_id": o.run.SessionID, "tags": []string{}}
}

// event translates one engine event.
func (o *lgStream) event(ev *stepwise.Event) {
	id := ev.Position.String()
	switch ev.Type {
	case stepwise.EventStepStarted:
		if o.modes["events"] {
			o.emit(id, "events", obj{"event": "on_chain_start", "name": ev.StepName, "run_id": o.run.ID, "tags": []string{}, "metadata": o.meta(ev.StepName, ev.Position.Seq), "parent_ids": []string{}, "data": obj{}})
		}
	case stepwise.EventStepDelta:
		d := ev.Delta
		if d == nil || (d.Content == "" && d.ToolCall == nil) {
			return
		}
		msgID := "run-" + o.run.ID + "-" + itoa(int(ev.Position.Seq))
		if o.resets > 0 {
			msgID += "-" + itoa(o.resets+1)
		}
		chunk := aiChunk(msgID, d.Content)
		if tc := d.ToolCall; tc != nil {
			chunk["tool_call_chunks"] = []obj{{"id": nilIfEmpty(tc.ID), "name": nilIfEmpty(tc.Name), "args": tc.Arguments, "index": tc.Index, "type": "tool_call_chunk"}}
		}
		o.chunked = true
		o.text.WriteString(d.Content)
		o.chunkID = msgID
		if o.modes["messages-tuple"] {
			o.emit(id, "messages", []any{chunk, o.meta(ev.StepName, ev.Position.Seq)})
		}
		if o.modes["messages"] && d.Content != "" {
			if o.partial == nil {
				o.partial = map[string]string{}
			}
			if _, seen := o.partial[msgID]; !seen {
				o.emit(id, "messages/metadata", obj{msgID: obj{"metadata": o.meta(ev.StepName, ev.Position.Seq)}})
			}
			o.partial[msgID] += d.Content
			o.emit(id, "messages/partial", []obj{{"type": "ai", "id": msgID, "content": o.partial[msgID], "tool_calls": []obj{}, "additional_kwargs": obj{}, "response_metadata": obj{}}})
		}
		if o.modes["events"] {
			o.emit(id, "events", obj{"event": "on_chat_model_stream", "name": ev.StepName, "run_id": o.run.ID, "tags": []string{}, "metadata": o.meta(ev.StepName, ev.Position.Seq), "parent_ids": []string{}, "data": obj{"chunk": chunk}})
		}
	case stepwise.EventStepReset:
		// The attempt's streamed output is void: the next attempt's chunks
		// are another message (the values have the one that counts), and
		// with none the step's message is sent whole when it completes.
		o.chunked = false
		o.partial = nil
		o.text.Reset()
		o.resets++
	case stepwise.EventStepYield:
		if o.modes["custom"] && ev.Yield != nil {
			var data any
			_ = json.Unmarshal(ev.Yield.Data, &data)
			o.emit(id, "custom", obj{"name": ev.Yield.Name, "data": data})
		}
	case stepwise.EventStepCompleted:
		st := ev.Step
		if st == nil || (o.view.last != nil && st.Sequence <= o.view.last.Sequence) {
			return
		}
		o.view.add(st)
		chunked, text, chunkID := o.chunked, o.text.String(), o.chunkID
		o.chunked = false
		o.text.Reset()
		if st.Hop != 0 {
			return
		}
		node := cmpOr(st.Name, string(st.Kind))
		msg := lgMessage(st)
		if o.modes["updates"] && st.Kind != steptype.KindUser {
			update := obj{}
			if msg != nil {
				update["messages"] = []obj{msg}
			}
			if len(st.StatePatch) > 0 && string(st.StatePatch) != "null" {
				var p map[string]any
				if json.Unmarshal(st.StatePatch, &p) == nil {
					for k, v := range p {
						update[k] = v
					}
				}
			}
			if len(update) > 0 {
				o.emit(id, "updates", obj{node: update})
			}
		}
		if msg != nil && msg["type"] != "human" && msg["type"] != "system" {
			if chunked && msg["type"] == "ai" && !strings.HasPrefix(st.Content, text) {
				chunked = false // the chunks are not this message's: send it whole
			}
			if o.modes["messages-tuple"] && chunked && msg["type"] == "ai" && len(st.Content) > len(text) {
				// Deltas were lost (a slow stream): the chunk they missed.
				o.emit(id, "messages", []any{aiChunk(chunkID, st.Content[len(text):]), o.meta(node, st.Sequence)})
			}
			if o.modes["messages-tuple"] && (msg["type"] != "ai" || !chunked) {
				o.emit(id, "messages", []any{msg, o.meta(node, st.Sequence)})
			}
			if o.modes["messages"] {
				o.emit(id, "messages/complete", []obj{msg})
			}
		}
		if o.modes["events"] {
			name := "on_chain_end"
			if st.Kind == steptype.KindTool {
				name = "on_tool_end"
			}
			o.emit(id, "events", obj{"event": name, "name": node, "run_id": o.run.ID, "tags": []string{}, "metadata": o.meta(node, st.Sequence), "parent_ids": []string{}, "data": obj{"output": msg}})
		}
		if o.modes["values"] && (msg != nil || !isNull(st.StatePatch)) {
			o.emit(id, "values", o.view.values())
		}
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// final ends the stream with how the run settled: its interrupts
// (__interrupt__ in updates and values), or an error event.
func (o *lgStream) final(ctx context.Context, run *stepwise.Run) {
	switch run.Status {
	case steptype.RunWaiting:
		ins, err := o.s.lgInterrupts(ctx, run.SessionID)
		if err != nil {
			o.emit("", "error", obj{"error": "StorageError", "message": err.Error()})
			break
		}
		list := lgInterruptList(ins)
		if o.modes["updates"] {
			o.emit("", "updates", obj{"__interrupt__": list})
		}
		if o.modes["values"] {
			v := o.view.values()
			v["__interrupt__"] = list
			o.emit("", "values", v)
		}
	case steptype.RunFailed:
		msg := "the run failed"
		if run.Error != nil {
			msg = run.Error.Message
		}
		o.emit("", "error", obj{"error": "RunError", "message": msg})
	}
	o.flush()
}

// follow streams the run after position after until it finished or parked
// on a request made after it, and returns it (nil when the client or the
// server went away). The subscription feeds a channel read here, so that
// this goroutine alone writes; a timer checks the store (a lifecycle event
// may be missed) and sends heartbeats.
func (o *lgStream) follow(ctx context.Context, after, from stepwise.Position) *stepwise.Run {
	s := o.s
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	evs := make(chan *stepwise.Event, 64)
	errc := make(chan error, 1)
	go func() {
		defer close(evs)
		for ev, err := range s.eng.Subscribe(sub, stepwise.SubscribeParams{RunID: o.run.ID, After: from}) {
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
	for o.sw != nil {
		check := false
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-evs:
			switch {
			case !ok:
				evs = nil
				select {
				case err := <-errc:
					o.emit("", "error", obj{"error": "StreamError", "message": err.Error()})
					o.flush()
					return nil
				default:
				}
				check = true
			case ev.Type == stepwise.EventRunWaiting, ev.Type == stepwise.EventRunFinished:
				check = true
			case ev.RunID == o.run.ID || (ev.Step != nil && ev.Step.Hop > 0):
				o.event(ev)
			}
		case <-tick.C:
			check = true
		}
		if check {
			r, err := s.runSettled(ctx, o.run.ID, after)
			if err != nil {
				o.emit("", "error", obj{"error": "StorageError", "message": err.Error()})
				o.flush()
				return nil
			}
			if r != nil {
				o.catchUp(ctx, r)
				o.final(ctx, r)
				return r
			}
		}
		if len(evs) == 0 {
			o.flush()
		}
		if o.sw != nil && time.Since(o.lastWrite) >= s.cfg.Heartbeat {
			if o.sw.commentLine("heartbeat") != nil {
				o.sw = nil
			}
			o.flush()
			o.lastWrite = time.Now()
		}
	}
	return nil
}

// catchUp translates the committed steps the stream has not seen (the run
// settled before their events were read).
func (o *lgStream) catchUp(ctx context.Context, run *stepwise.Run) {
	from := int64(1)
	if o.view.last != nil {
		from = o.view.last.Sequence + 1
	}
	steps, err := o.s.eng.Store().StepList(ctx, &store.StepListParams{SessionID: run.SessionID, StartSeq: from})
	if err != nil {
		return
	}
	for _, st := range steps {
		if st.RunID != run.ID && st.Hop == 0 {
			continue // another run's, or a state update
		}
		o.event(&stepwise.Event{Type: stepwise.EventStepCompleted, SessionID: st.SessionID, RunID: st.RunID, StepName: st.Name, Step: st, Position: stepwise.Position{Seq: st.Sequence}})
	}
}

// aiChunk is a LangGraph AIMessageChunk of message id carrying content.
func aiChunk(id, content string) obj {
	return obj{"type": "AIMessageChunk", "id": id, "content": content, "additional_kwargs": obj{}, "response_metadata": obj{}, "tool_call_chunks": []obj{}, "tool_calls": []obj{}}
}
