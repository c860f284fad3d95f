package otlpingest

import (
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// span is one received span, decoded from OTLP.
type span struct {
	traceID, spanID, parentID string // lower-case hex
	name                      string
	start, end                time.Time
	a                         attrs // span attributes
	res                       attrs // resource attributes
	events                    []event
	failed                    bool // status code ERROR
	statusMsg                 string
	// mapped is set on spans made from another trace format (LangSmith
	// runs): what classify returns for it.
	mapped *unit
}

// event is a span event or a log record linked to a span.
type event struct {
	name string
	time time.Time
	a    attrs
	body any
}

// role says what a span becomes.
type role int

const (
	roleIgnore role = iota // not a step (framework internals, HTTP spans…)
	roleRun                // the agent invocation: the run itself
	roleLLM                // one model call: an llm step
	roleTool               // one tool execution: a tool step
	roleCustom             // another recognised operation: a custom step
)

// message is one chat message of a model request or response.
type message struct {
	role      string // system, user, assistant, tool
	content   string
	reasoning string
	calls     []steptype.ToolCall
	callID    string // tool messages: the call answered
	name      string // tool messages: the tool's name when known
}

// unit is what the mapping of one span produced.
type unit struct {
	role       role
	convention string // gen_ai, openinference, vercel_ai
	session    string // conversation / session id named by the span
	agent      string
	stepName   string // custom steps

	// llm
	input     []message
	output    *message
	finish    []string
	model     string
	provider  string
	inTokens  int64
	outTokens int64
	cached    int64
	reasoning int64
	awaitLogs bool // message content is expected from log records

	// tool and custom
	toolName string
	callID   string
	args     json.RawMessage
	result   json.RawMessage
}

// classify maps s by the first convention that recognises it.
func classify(s *span) *unit {
	switch {
	case s.mapped != nil:
		return s.mapped
	case s.a["openinference.span.kind"] != nil:
		return openInference(s)
	case s.a["ai.operationId"] != nil:
		return vercel(s)
	case s.a["gen_ai.operation.name"] != nil || operationFromName(s) != "":
		return genAI(s)
	}
	return &unit{role: roleIgnore}
}

// argsJSON returns tool-call arguments as JSON (an object when the
// arguments are missing).
func argsJSON(v any) json.RawMessage {
	if r := rawJSON(v); r != nil {
		return r
	}
	return json.RawMessage(`{}`)
}

// finished is when the span ended: its end, or its start when it ends
// before it starts (clock skew).
func (s *span) finished() time.Time {
	if s.end.After(s.start) {
		return s.end
	}
	return s.start
}
