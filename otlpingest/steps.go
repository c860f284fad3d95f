package otlpingest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// stepsOf returns the new steps a held span adds to its session.
func (in *Ingester) stepsOf(ts *traceState, ss *sessionState, h *held) []*stepwise.Step {
	s, u := h.s, h.u
	var out []*stepwise.Step
	add := func(st *stepwise.Step) {
		if ss.seen[st.ID] {
			return
		}
		ss.seen[st.ID] = true
		st.RunID = ts.runID
		st.ParentID = ss.lastStep
		ss.lastStep = st.ID
		if st.Status == "" {
			st.Status = steptype.StepCompleted
		}
		if st.Metadata == nil {
			st.Metadata = map[string]any{}
		}
		st.Metadata["otel_trace_id"] = s.traceID
		st.Metadata["otel_span_id"] = s.spanID
		st.Metadata["otel_convention"] = u.convention
		out = append(out, st)
	}
	switch u.role {
	case roleLLM:
		for _, st := range in.newMessages(ts, s, u) {
			add(st)
		}
		if s.failed {
			add(errorStep(s, "llm", "", "model call failed"))
			return out
		}
		st := llmStep(s, u)
		for _, c := range st.ToolCalls {
			ss.calls[c.ID] = c
			ss.unanswered = append(ss.unanswered, c.ID)
		}
		add(st)
		if u.output != nil && u.output.content != "" {
			ss.output = u.output.content
		}
	case roleTool:
		if s.failed {
			add(errorStep(s, "tools", u.toolName, "tool call failed"))
			return out
		}
		call := u.callID
		if call == "" {
			// OpenInference's traceTool records no call id; the model's
			// call it answers does not come again as a second step.
			call = ss.callOf(ts.sessionID, u.toolName)
		}
		st := toolStep(ts.sessionID, s, u, call)
		// The arguments the model gave win over what the span shows when
		// that is not an object (OpenInference records the tool's input).
		if c, ok := ss.calls[st.ToolCallID]; ok && (len(st.Inputs) == 0 || st.Inputs[0] != '{') {
			st.Inputs = c.Arguments
		}
		add(st)
	case roleCustom:
		if s.failed {
			add(errorStep(s, u.stepName, "", u.stepName+" failed"))
			return out
		}
		st := &stepwise.Step{ID: spanStepID(s.traceID, s.spanID), Kind: steptype.KindCustom, Name: u.stepName, Inputs: u.args, Outputs: u.result}
		timed(st, s)
		add(st)
	case roleRun:
		if s.failed {
			add(errorStep(s, "agent", "", "agent invocation failed"))
		}
	}
	return out
}

// callOf returns the oldest unanswered call of the tool named name, "" when
// there is none, dropping the answered calls it passes.
func (ss *sessionState) callOf(session, name string) string {
	keep := ss.unanswered[:0]
	found := ""
	for _, id := range ss.unanswered {
		if ss.seen[toolStepID(session, id)] {
			continue
		}
		keep = append(keep, id)
		if found == "" && ss.calls[id].Name == name {
			found = id
		}
	}
	ss.unanswered = keep
	return found
}

// newMessages returns the user and tool messages a model call adds: the
// messages after the last assistant message of its input (everything
// before it was the input of an earlier call). Their ids derive from that
// assistant message and their offset after it, so a history re-sent with
// every call, or trimmed by the caller, never duplicates a step. Tool
// results share their id with the tool span of the same call id.
func (in *Ingester) newMessages(ts *traceState, s *span, u *unit) []*stepwise.Step {
	last := -1
	for i, m := range u.input {
		if m.role == "assistant" {
			last = i
		}
	}
	// Without an assistant message the call opens a conversation (or a
	// stateful API sent only the new input): its messages are new per
	// trace, so a later turn of the same conversation is not mistaken
	// for a re-send of the first.
	anchor := "start:" + s.traceID
	calls := map[string]steptype.ToolCall{}
	if last >= 0 {
		anchor = messageKey(u.input[last])
		for _, c := range u.input[last].calls {
			calls[c.ID] = c
		}
	}
	var out []*stepwise.Step
	for off, m := range u.input[last+1:] {
		switch m.role {
		case "user":
			st := &stepwise.Step{ID: messageStepID(ts.sessionID, anchor, off, "user"), Kind: steptype.KindUser, Name: "user",
				Role: steptype.RoleUser, Content: m.content}
			st.Metrics.StartedAt, st.Metrics.FinishedAt = s.start, s.start
			out = append(out, st)
		case "tool":
			if m.callID == "" {
				continue
			}
			c := calls[m.callID]
			name := m.name
			if name == "" {
				name = c.Name
			}
			st := &stepwise.Step{ID: toolStepID(ts.sessionID, m.callID), Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool,
				ToolCallID: m.callID, ToolName: name, Content: m.content, Inputs: c.Arguments, Outputs: rawJSON(m.content)}
			st.Metrics.StartedAt, st.Metrics.FinishedAt = s.start, s.start
			out = append(out, st)
		}
	}
	return out
}

// messageKey identifies an assistant message independently of its
// position: its tool call ids, else a hash of its content.
func messageKey(m message) string {
	if len(m.calls) > 0 {
		ids := make([]string, len(m.calls))
		for i, c := range m.calls {
			ids[i] = c.ID
		}
		return "calls:" + strings.Join(ids, ",")
	}
	h := sha256.Sum256([]byte(m.content))
	return "text:" + hex.EncodeToString(h[:12])
}

func llmStep(s *span, u *unit) *stepwise.Step {
	st := &stepwise.Step{ID: spanStepID(s.traceID, s.spanID), Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant}
	if o := u.output; o != nil {
		st.Content, st.Reasoning = o.content, o.reasoning
		for i, c := range o.calls {
			if c.ID == "" {
				c.ID = "call_" + s.spanID + "_" + itoa(i)
			}
			st.ToolCalls = append(st.ToolCalls, c)
		}
	}
	timed(st, s)
	st.Metrics.InputTokens, st.Metrics.OutputTokens = u.inTokens, u.outTokens
	st.Metrics.CachedTokens, st.Metrics.ReasoningTokens = u.cached, u.reasoning
	st.Metrics.Model, st.Metrics.Provider = u.model, u.provider
	st.Metadata = map[string]any{}
	if len(u.finish) > 0 {
		st.Metadata["finish_reasons"] = u.finish
	}
	if u.output == nil {
		st.Metadata["content_captured"] = false
	}
	return st
}

// toolStep is the step of a tool span answering call ("": none known).
func toolStep(session string, s *span, u *unit, call string) *stepwise.Step {
	id := spanStepID(s.traceID, s.spanID)
	if call != "" {
		id = toolStepID(session, call)
	} else {
		call = "call_" + s.spanID
	}
	st := &stepwise.Step{ID: id, Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: call, ToolName: u.toolName,
		Inputs: u.args, Outputs: u.result, Content: resultText(u.result)}
	timed(st, s)
	return st
}

// resultText is a tool result as message content: a JSON string unquoted,
// other JSON as is.
func resultText(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	return string(r)
}

func errorStep(s *span, name, tool, fallback string) *stepwise.Step {
	msg := s.statusMsg
	if msg == "" {
		msg = fallback
	}
	for _, e := range s.events {
		if e.name == "exception" {
			if m := e.a.str("exception.message"); m != "" && s.statusMsg == "" {
				msg = m
			}
		}
	}
	st := &stepwise.Step{ID: spanStepID(s.traceID, s.spanID), Kind: steptype.KindError, Name: name, Status: steptype.StepFailed, ToolName: tool,
		Error: &steptype.StepError{Message: msg, Class: steptype.ErrorPermanent, Code: "otel_error"}}
	timed(st, s)
	return st
}

// timed copies the span's times. A span that ends before it starts (clock
// skew) gets a zero duration.
func timed(st *stepwise.Step, s *span) {
	st.Metrics.StartedAt, st.Metrics.FinishedAt = s.start, s.end
	if s.end.After(s.start) {
		st.Metrics.Duration = s.end.Sub(s.start)
	} else {
		st.Metrics.FinishedAt = s.start
	}
}
