package telemetry

import (
	"encoding/json"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// maxInputMessages bounds the gen_ai.input.messages of a model call: the
// newest messages of its run.
const maxInputMessages = 64

// maxTrackedRuns bounds the runs whose messages the exporter keeps (runs
// that park and resume in another process are never finished here).
const maxTrackedRuns = 4096

// genAIMessage is a message of the GenAI conventions' input and output
// message attributes: a role and typed parts.
type genAIMessage struct {
	Role         string           `json:"role"`
	Parts        []map[string]any `json:"parts"`
	FinishReason string           `json:"finish_reason,omitempty"`
}

// stepMessage is the message a committed step adds to its run's
// conversation, if any.
func stepMessage(s *stepwise.Step) (genAIMessage, bool) {
	switch {
	case s.Status == steptype.StepWaiting || !s.InMessageContext():
		return genAIMessage{}, false
	case s.Role == steptype.RoleTool:
		var resp any = s.Content
		if json.Valid([]byte(s.Content)) {
			resp = json.RawMessage(s.Content)
		}
		return genAIMessage{Role: "tool", Parts: []map[string]any{{"type": "tool_call_response", "id": s.ToolCallID, "response": resp}}}, true
	case s.Role == steptype.RoleAssistant:
		return assistantMessage(s), true
	}
	return genAIMessage{Role: string(s.Role), Parts: []map[string]any{{"type": "text", "content": s.Content}}}, true
}

// assistantMessage is a model step's answer: its reasoning, text and tool
// calls.
func assistantMessage(s *stepwise.Step) genAIMessage {
	m := genAIMessage{Role: "assistant", Parts: []map[string]any{}}
	if s.Reasoning != "" {
		m.Parts = append(m.Parts, map[string]any{"type": "reasoning", "content": s.Reasoning})
	}
	if s.Content != "" {
		m.Parts = append(m.Parts, map[string]any{"type": "text", "content": s.Content})
	}
	for _, c := range s.ToolCalls {
		var args any = map[string]any{}
		if len(c.Arguments) > 0 && json.Valid(c.Arguments) {
			args = c.Arguments
		}
		m.Parts = append(m.Parts, map[string]any{"type": "tool_call", "id": c.ID, "name": c.Name, "arguments": args})
	}
	if v, ok := s.Metadata["finish_reason"].(string); ok {
		m.FinishReason = v
	}
	return m
}

// inputMessages returns the messages of r this exporter saw before s (the
// newest maxInputMessages) and, s being committed, adds the message of s.
// Called in commit order (observers get steps in order).
func (x *Exporter) inputMessages(r *stepwise.Run, s *stepwise.Step) []genAIMessage {
	x.mu.Lock()
	defer x.mu.Unlock()
	prev := x.msgs[r.ID]
	var in []genAIMessage
	if s.Kind == steptype.KindLLM {
		in = prev[max(0, len(prev)-maxInputMessages):]
	}
	if m, ok := stepMessage(s); ok {
		if _, known := x.msgs[r.ID]; !known && len(x.msgs) >= maxTrackedRuns {
			clear(x.msgs)
		}
		next := append(prev, m)
		if len(next) > 2*maxInputMessages {
			next = append([]genAIMessage(nil), next[len(next)-maxInputMessages:]...)
		}
		x.msgs[r.ID] = next
	}
	return in
}

// forget drops the messages of a finished run.
func (x *Exporter) forget(runID string) {
	x.mu.Lock()
	delete(x.msgs, runID)
	x.mu.Unlock()
}
