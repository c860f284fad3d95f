package otlpingest

import (
	"encoding/json"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
)

// genAI maps a span of the OpenTelemetry GenAI semantic conventions.
func genAI(s *span) *unit {
	u := &unit{convention: "gen_ai", session: s.a.str("gen_ai.conversation.id"),
		agent: s.a.first("gen_ai.agent.name")}
	op := s.a.str("gen_ai.operation.name")
	if op == "" {
		op = operationFromName(s)
	}
	switch op {
	case "invoke_agent", "create_agent":
		u.role = roleRun
	case "chat", "text_completion", "generate_content":
		u.role = roleLLM
		u.model = s.a.first("gen_ai.response.model", "gen_ai.request.model")
		u.provider = s.a.first("gen_ai.provider.name", "gen_ai.system")
		u.inTokens = s.a.num("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
		u.outTokens = s.a.num("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
		u.cached = s.a.num("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
		u.finish = s.a.strs("gen_ai.response.finish_reasons")
		genAIMessages(u, s)
	case "execute_tool":
		u.role = roleTool
		u.toolName = s.a.str("gen_ai.tool.name")
		u.callID = s.a.str("gen_ai.tool.call.id")
		if v, ok := s.a["gen_ai.tool.call.arguments"]; ok {
			u.args = argsJSON(v)
		}
		if v, ok := s.a["gen_ai.tool.call.result"]; ok {
			u.result = rawJSON(v)
		}
	case "embeddings":
		u.role = roleIgnore
	default:
		u.role = roleCustom
		u.stepName = op
	}
	return u
}

// genAIMessages reads the messages of a model call: the current
// gen_ai.input.messages / gen_ai.output.messages attributes when present,
// else the older gen_ai.prompt / gen_ai.completion forms (legacyMessages),
// else the per-message events (span events or linked log records).
func genAIMessages(u *unit, s *span) {
	a := s.a
	for _, e := range s.events {
		if e.name == "gen_ai.client.inference.operation.details" {
			for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages"} {
				if _, ok := a[k]; !ok && e.a[k] != nil {
					a = copyAttrs(a)
					a[k] = e.a[k]
				}
			}
		}
	}
	if in, ok := a.jsonValue("gen_ai.input.messages"); ok {
		for _, m := range list(in) {
			u.input = append(u.input, partsMessages(m)...)
		}
		if out, ok := a.jsonValue("gen_ai.output.messages"); ok {
			for _, m := range list(out) {
				ms := partsMessages(m)
				if len(ms) > 0 && u.output == nil {
					u.output = &ms[0]
				}
				if fr := asString(field(m, "finish_reason")); fr != "" && len(u.finish) == 0 {
					u.finish = []string{fr}
				}
			}
		}
		return
	}
	if legacyMessages(u, s) {
		return
	}
	sawChoice := false
	for _, e := range s.events {
		p := eventPayload(e)
		switch e.name {
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			m := eventMessage(strings.TrimSuffix(strings.TrimPrefix(e.name, "gen_ai."), ".message"), p)
			u.input = append(u.input, m)
		case "gen_ai.choice":
			sawChoice = true
			if u.output == nil {
				mm, _ := field(p, "message").(map[string]any)
				m := eventMessage("assistant", mm)
				u.output = &m
			}
			if fr := asString(field(p, "finish_reason")); fr != "" && len(u.finish) == 0 {
				u.finish = []string{fr}
			}
		}
	}
	// Instrumentations such as @opentelemetry/instrumentation-openai put no
	// content on the span: it comes as log records, the last of which is
	// the choice.
	u.awaitLogs = !sawChoice
}

func copyAttrs(a attrs) attrs {
	out := make(attrs, len(a)+2)
	for k, v := range a {
		out[k] = v
	}
	return out
}

// eventPayload is the structured content of a GenAI event: the log body,
// else a gen_ai.event.content JSON attribute, else the attributes.
func eventPayload(e event) map[string]any {
	if m, ok := e.body.(map[string]any); ok {
		return m
	}
	if s, ok := e.a["gen_ai.event.content"].(string); ok {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			return m
		}
	}
	return e.a
}

// eventMessage reads {content, tool_calls, id} of a per-message event.
func eventMessage(role string, p map[string]any) message {
	m := message{role: role, content: contentText(field(p, "content")), callID: asString(field(p, "id"))}
	if r := asString(field(p, "role")); r != "" && role == "assistant" {
		m.role = r
	}
	calls := field(p, "tool_calls")
	if s, ok := calls.(string); ok {
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			calls = v
		}
	}
	for _, c := range list(calls) {
		fn, _ := field(c, "function").(map[string]any)
		m.calls = append(m.calls, steptype.ToolCall{ID: asString(field(c, "id")), Name: asString(field(fn, "name")),
			Arguments: argsJSON(field(fn, "arguments"))})
	}
	if role != "tool" {
		m.callID = ""
	}
	return m
}

// partsMessages reads one message of gen_ai.input.messages /
// gen_ai.output.messages ({role, parts: [...]}). A message with several
// tool_call_response parts becomes one tool message per part.
func partsMessages(v any) []message {
	role := asString(field(v, "role"))
	m := message{role: role}
	var tools []message
	for _, p := range list(field(v, "parts")) {
		switch asString(field(p, "type")) {
		case "text":
			m.content += contentText(field(p, "content"))
		case "reasoning":
			m.reasoning += contentText(field(p, "content"))
		case "tool_call":
			m.calls = append(m.calls, steptype.ToolCall{ID: asString(field(p, "id")), Name: asString(field(p, "name")), Arguments: argsJSON(field(p, "arguments"))})
		case "tool_call_response":
			r := field(p, "response")
			if r == nil {
				r = field(p, "result")
			}
			tools = append(tools, message{role: "tool", callID: asString(field(p, "id")), content: contentText(r)})
		}
	}
	if len(tools) > 0 && m.content == "" && len(m.calls) == 0 {
		return tools
	}
	return append([]message{m}, tools...)
}

// contentText renders message content: a string as is, a list of parts by
// their text, anything else as JSON.
func contentText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, p := range x {
			if s, ok := p.(string); ok {
				b.WriteString(s)
				continue
			}
			if t := field(p, "text"); t != nil {
				b.WriteString(asString(t))
			} else if t := field(p, "content"); t != nil {
				b.WriteString(asString(t))
			}
		}
		return b.String()
	}
	return asString(v)
}

func field(v any, key string) any {
	switch m := v.(type) {
	case map[string]any:
		return m[key]
	case attrs:
		return m[key]
	}
	return nil
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}
