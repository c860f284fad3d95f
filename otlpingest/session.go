package otlpingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// runLease is the lease of an ingested run: far enough that no executor
// ever claims it (the run has no agent definition to execute).
const runLease = 100 * 365 * 24 * time.Hour

// open resolves the session and run of a trace at its first flush: the
// run of the trace when a previous process created it, else the session
// named by gen_ai.conversation.id / session.id, else one per trace. The
// session and a running run are created when missing.
func (in *Ingester) open(ctx context.Context, ts *traceState, hs []*held) error {
	ts.runID = RunID(ts.id)
	run, err := in.st.RunGet(ctx, &store.RunGetParams{ID: ts.runID})
	switch {
	case err == nil:
		ts.sessionID = run.SessionID
		ts.runOpen = !run.Status.Terminal()
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	conv := ""
	var start time.Time
	for _, h := range hs {
		if conv == "" {
			conv = h.u.session
		}
		if !h.s.start.IsZero() && (start.IsZero() || h.s.start.Before(start)) {
			start = h.s.start
		}
	}
	title := traceTitle(hs)
	agent := agentName(hs)
	meta := map[string]string{"source": "otlp", "trace_id": ts.id}
	sid := TraceSessionID(ts.id)
	if conv != "" {
		sid = SessionID(conv)
		meta = map[string]string{"source": "otlp", "conversation_id": conv}
		title = conv
	}
	mb, _ := json.Marshal(meta)
	if _, err := in.st.SessionGet(ctx, &store.SessionGetParams{ID: sid}); errors.Is(err, store.ErrNotFound) {
		_, err = in.st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: agent, Title: title, Metadata: mb, Now: start})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: create session: %w", ErrUnavailable, err)
		}
	} else if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// One unfinished run per session: an older trace of the conversation
	// whose root never arrived is finished by the new one.
	open, err := in.st.RunList(ctx, &store.RunListParams{SessionID: sid, Statuses: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting}})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, r := range open {
		if r.LeaseOwner != Owner {
			// A run of a Stepwise agent is in progress in this session:
			// record the steps without a run of their own.
			ts.sessionID, ts.runID = sid, ""
			return nil
		}
		st := steptype.RunCompleted
		if _, err := in.st.RunUpdate(ctx, &store.RunUpdateParams{ID: r.ID, Status: &st, ClearLease: true}); err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	now := time.Now()
	_, err = in.st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: ts.runID, SessionID: sid, Agent: agent,
		Status: steptype.RunRunning, Cursor: "otlp", LeaseOwner: Owner, LeaseExpires: now.Add(runLease), CreatedAt: start}})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: create run: %w", ErrUnavailable, err)
	}
	ts.sessionID, ts.runOpen = sid, true
	return nil
}

// agentName names the agent of a trace: the resource's service.name, which
// every export of the process carries (so the name does not depend on
// which spans arrived first), unless it is the SDK default
// "unknown_service…"; else the agent a span names (gen_ai.agent.name of an
// invoke_agent span first, ai.telemetry.functionId, the OpenInference
// agent); else "otel".
func agentName(hs []*held) string {
	for _, h := range hs {
		if n := h.s.res.str("service.name"); n != "" && !strings.HasPrefix(n, "unknown_service") {
			return n
		}
	}
	for _, h := range hs {
		if h.u.role == roleRun && h.u.agent != "" {
			return h.u.agent
		}
	}
	for _, h := range hs {
		if h.u.agent != "" {
			return h.u.agent
		}
	}
	return "otel"
}

// maxTitle bounds a session title taken from a message, in runes.
const maxTitle = 80

// traceTitle names the session of a trace without a conversation id after
// its conversation: the first user message of its earliest model call, else
// the agent a run span names, else the earliest span's name.
func traceTitle(hs []*held) string {
	for _, h := range hs {
		if h.u.role != roleLLM {
			continue
		}
		for _, m := range h.u.input {
			if t := strings.Join(strings.Fields(m.content), " "); m.role == "user" && t != "" {
				if r := []rune(t); len(r) > maxTitle {
					t = string(r[:maxTitle-1]) + "…"
				}
				return t
			}
		}
	}
	for _, h := range hs {
		if h.u.role == roleRun && h.u.agent != "" {
			return h.u.agent
		}
	}
	if len(hs) > 0 {
		return hs[0].s.name
	}
	return ""
}
