package server

import (
	"encoding/json"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// aguiTranslator turns Stepwise events into AG-UI events. Deltas stream
// text, reasoning and tool calls as they come; the committed step then
// completes whatever the deltas did not carry (deltas a lagging subscriber
// skipped, or a step that did not stream at all, such as a replayed one), so
// the AG-UI messages always end up equal to the recorded step.
type aguiTranslator struct {
	emit     func(*aguiEvent)
	state    json.RawMessage // the run's custom state
	openStep string          // graph step between STEP_STARTED and STEP_FINISHED
	// resumed is the graph step a resume's answers opened (answered): the
	// resumed execution's step_started event of that step continues it
	// instead of framing it a second time.
	resumed   string
	text      aguiMsg
	reasoning aguiMsg
	calls     []*aguiCall // by tool-call index, for the step in flight
	msgID     string      // the assistant message of the model step in flight: text and tool calls share it
	lastSeq   int64       // highest committed step translated
}

// aguiMsg is a streamed text or reasoning message.
type aguiMsg struct {
	id   string
	open bool
	sent strings.Builder
}

type aguiCall struct {
	id, name string
	args     strings.Builder // arguments sent (or buffered before START)
	started  bool
	ended    bool
}

// maxCallIndex bounds the tool-call index accepted from a delta.
const maxCallIndex = 256

func (t *aguiTranslator) snapshot() json.RawMessage {
	if len(t.state) == 0 || string(t.state) == "null" {
		return json.RawMessage("{}")
	}
	return t.state
}

// stepStarted opens a graph step, closing the previous one.
func (t *aguiTranslator) stepStarted(name string) {
	if name == "" {
		name = "step"
	}
	if r := t.resumed; r != "" {
		t.resumed = ""
		if r == name && t.openStep == name {
			return
		}
	}
	t.closeStep()
	t.openStep = name
	t.emit(&aguiEvent{Type: aguiStepStarted, StepName: name})
}

// closeStep closes what is open: messages, tool calls, the graph step.
func (t *aguiTranslator) closeStep() {
	t.closeReasoning()
	t.closeText()
	for _, c := range t.calls {
		t.endCall(c)
	}
	t.calls = nil
	t.msgID = ""
	if t.openStep != "" {
		t.emit(&aguiEvent{Type: aguiStepFinished, StepName: t.openStep})
		t.openStep = ""
	}
}

func (t *aguiTranslator) delta(d *stepwise.Delta) {
	if d == nil {
		return
	}
	if d.Reasoning != "" {
		t.closeText()
		t.openReasoning("")
		t.emit(&aguiEvent{Type: aguiReasonContent, MessageID: t.reasoning.id, Delta: d.Reasoning})
		t.reasoning.sent.WriteString(d.Reasoning)
	}
	if d.Content != "" {
		t.closeReasoning()
		t.openText("")
		t.emit(&aguiEvent{Type: aguiTextContent, MessageID: t.text.id, Delta: d.Content})
		t.text.sent.WriteString(d.Content)
	}
	if tc := d.ToolCall; tc != nil && tc.Index >= 0 && tc.Index < maxCallIndex {
		t.closeReasoning()
		t.closeText() // the calls follow the text; it stays their parent
		for len(t.calls) <= tc.Index {
			t.calls = append(t.calls, &aguiCall{})
		}
		c := t.calls[tc.Index]
		if c.ended {
			return
		}
		if c.id == "" {
			c.id = tc.ID
		}
		if c.name == "" {
			c.name = tc.Name
		}
		switch {
		case c.started:
			if tc.Arguments != "" {
				t.emit(&aguiEvent{Type: aguiToolArgs, ToolCallID: c.id, Delta: tc.Arguments})
				c.args.WriteString(tc.Arguments)
			}
		default:
			c.args.WriteString(tc.Arguments)
			if c.id != "" && c.name != "" {
				t.startCall(c)
			}
		}
	}
}

func (t *aguiTranslator) openText(id string) {
	if t.text.open {
		return
	}
	if id == "" {
		id = t.msgID
	}
	if id == "" {
		id = stepwise.NewID()
	}
	if t.msgID == "" {
		t.msgID = id
	}
	t.text.id, t.text.open = id, true
	t.text.sent.Reset()
	t.emit(&aguiEvent{Type: aguiTextStart, MessageID: id, Role: "assistant"})
}

func (t *aguiTranslator) closeText() {
	if t.text.open {
		t.emit(&aguiEvent{Type: aguiTextEnd, MessageID: t.text.id})
		t.text.open = false
	}
}

func (t *aguiTranslator) openReasoning(id string) {
	if t.reasoning.open {
		return
	}
	if id == "" {
		id = stepwise.NewID()
	}
	t.reasoning.id, t.reasoning.open = id, true
	t.reasoning.sent.Reset()
	t.emit(&aguiEvent{Type: aguiReasonStart, MessageID: id})
	t.emit(&aguiEvent{Type: aguiReasonMsgOpen, MessageID: id, Role: "reasoning"})
}

func (t *aguiTranslator) closeReasoning() {
	if t.reasoning.open {
		t.emit(&aguiEvent{Type: aguiReasonMsgEnd, MessageID: t.reasoning.id})
		t.emit(&aguiEvent{Type: aguiReasonEnd, MessageID: t.reasoning.id})
		t.reasoning.open = false
	}
}

// startCall sends TOOL_CALL_START and the arguments buffered so far.
func (t *aguiTranslator) startCall(c *aguiCall) {
	c.started = true
	// Every call of one model step belongs to one assistant message, also
	// when the step has no text.
	if t.msgID == "" {
		t.msgID = stepwise.NewID()
	}
	t.emit(&aguiEvent{Type: aguiToolStart, ToolCallID: c.id, ToolCallName: c.name, ParentMessageID: t.msgID})
	if c.args.Len() > 0 {
		t.emit(&aguiEvent{Type: aguiToolArgs, ToolCallID: c.id, Delta: c.args.String()})
	}
}

func (t *aguiTranslator) endCall(c *aguiCall) {
	if c.started && !c.ended {
		t.emit(&aguiEvent{Type: aguiToolEnd, ToolCallID: c.id})
	}
	c.ended = true
}

// reset voids what the step in flight streamed: its attempt failed. The
// open messages and tool calls are ended, then a CUSTOM "stepwise.reset"
// event names them so that a front end discards their partial content; the
// next attempt streams under new message ids.
func (t *aguiTranslator) reset(step string, r *stepwise.Reset) {
	var msgs, calls []string
	if t.text.id != "" {
		msgs = append(msgs, t.text.id)
	}
	if t.reasoning.id != "" {
		msgs = append(msgs, t.reasoning.id)
	}
	for _, c := range t.calls {
		if c.started {
			calls = append(calls, c.id)
		}
	}
	t.closeReasoning()
	t.closeText()
	for _, c := range t.calls {
		t.endCall(c)
	}
	t.calls = nil
	t.text.id, t.reasoning.id, t.msgID = "", "", ""
	t.text.sent.Reset()
	t.reasoning.sent.Reset()
	v := map[string]any{"step": step, "message_ids": msgs, "tool_call_ids": calls}
	if r != nil {
		v["attempt"], v["reason"], v["retrying"] = r.Attempt, r.Reason, r.Retrying
	}
	t.emit(&aguiEvent{Type: aguiCustom, Name: "stepwise.reset", Value: v})
}

// custom forwards a step's progress report or typed yield as a CUSTOM
// event ("stepwise.progress", "stepwise.yield").
func (t *aguiTranslator) custom(ev *stepwise.Event) {
	switch {
	case ev.Progress != nil:
		t.emit(&aguiEvent{Type: aguiCustom, Name: "stepwise.progress", Value: map[string]any{"step": ev.StepName, "fraction": ev.Progress.Fraction, "message": ev.Progress.Message}})
	case ev.Yield != nil:
		t.emit(&aguiEvent{Type: aguiCustom, Name: "stepwise.yield", Value: map[string]any{"step": ev.StepName, "name": ev.Yield.Name, "data": ev.Yield.Data}})
	}
}

// step translates a committed step. A step whose STEP_STARTED was not
// seen (the stream caught up from the store, which has no step-started
// events) opens its graph step first, so STEP_STARTED / STEP_FINISHED
// frame every step whatever path it came by.
func (t *aguiTranslator) step(st *stepwise.Step) {
	t.lastSeq = max(t.lastSeq, st.Sequence)
	if st.Kind != steptype.KindUser && st.Kind != steptype.KindSystem && st.Name != "" && t.openStep != st.Name {
		t.stepStarted(st.Name)
	}
	switch {
	case st.Kind == steptype.KindLLM:
		t.llmDone(st)
	case st.Role == steptype.RoleTool && st.ToolCallID != "" && st.Status != steptype.StepWaiting:
		t.toolResult(st)
	case st.Kind == steptype.KindError && st.Error != nil:
		t.emit(&aguiEvent{Type: aguiCustom, Name: "stepwise.error", Value: map[string]any{"step": st.Name, "sequence": st.Sequence, "error": st.Error}})
	}
	if len(st.StatePatch) > 0 {
		if next, err := stepwise.MergePatch(t.state, st.StatePatch); err == nil {
			// The change as a JSON Patch against the state the client has
			// (a step replayed from the store, already in it, gives no
			// operations); a snapshot when it cannot be computed.
			if delta, err := stateDelta(t.state, next); err == nil {
				t.emit(&aguiEvent{Type: aguiStateDelta, Patch: delta})
			} else {
				t.emit(&aguiEvent{Type: aguiStateSnapshot, Snapshot: next})
			}
			t.state = next
		}
	}
}

// answered reports an input request answered by a resume: an ask_human
// answer is the result of its tool call, inside its graph step (the tools
// step), which it opens as step does.
func (t *aguiTranslator) answered(st *stepwise.Step) {
	t.lastSeq = max(t.lastSeq, st.Sequence)
	if st.Role == steptype.RoleTool && st.ToolCallID != "" {
		if st.Name != "" && t.openStep != st.Name {
			t.stepStarted(st.Name)
			t.resumed = st.Name
		}
		t.toolResult(st)
	}
}

func (t *aguiTranslator) toolResult(st *stepwise.Step) {
	content := st.Content
	if content == "" && len(st.Outputs) > 0 {
		content = string(st.Outputs)
	}
	t.emit(&aguiEvent{Type: aguiToolResult, MessageID: st.ID, ToolCallID: st.ToolCallID, Content: &content, Role: "tool"})
}

// llmDone completes the messages of a model call from its committed step.
func (t *aguiTranslator) llmDone(st *stepwise.Step) {
	if rest, ok := remainder(st.Reasoning, &t.reasoning); ok && rest != "" {
		t.closeText()
		t.openReasoning(st.ID + "-reasoning")
		t.emit(&aguiEvent{Type: aguiReasonContent, MessageID: t.reasoning.id, Delta: rest})
	}
	t.closeReasoning()
	if t.msgID == "" {
		t.msgID = st.ID
	}
	if rest, ok := remainder(st.Content, &t.text); ok && rest != "" {
		t.openText(t.msgID)
		t.emit(&aguiEvent{Type: aguiTextContent, MessageID: t.text.id, Delta: rest})
	}
	t.closeText()
	for i, tc := range st.ToolCalls {
		var c *aguiCall
		if i < len(t.calls) {
			c = t.calls[i]
		}
		args := string(tc.Arguments)
		if c != nil && c.started && c.id == tc.ID {
			if sent := c.args.String(); !c.ended && strings.HasPrefix(args, sent) && len(args) > len(sent) {
				t.emit(&aguiEvent{Type: aguiToolArgs, ToolCallID: c.id, Delta: args[len(sent):]})
			}
			t.endCall(c)
			continue
		}
		if c != nil {
			t.endCall(c)
		}
		c = &aguiCall{id: tc.ID, name: tc.Name}
		c.args.WriteString(args)
		t.startCall(c)
		t.endCall(c)
	}
	for _, c := range t.calls {
		t.endCall(c)
	}
	t.calls = nil
	t.text.id, t.reasoning.id, t.msgID = "", "", ""
	t.text.sent.Reset()
	t.reasoning.sent.Reset()
}

// remainder is what of full the deltas have not sent; ok is false when
// what was sent is not a prefix of full (nothing sensible to add).
func remainder(full string, m *aguiMsg) (string, bool) {
	sent := m.sent.String()
	if !strings.HasPrefix(full, sent) {
		return "", false
	}
	return full[len(sent):], true
}
