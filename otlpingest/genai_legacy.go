package otlpingest

import (
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
)

// genAIOperations are the values of gen_ai.operation.name that also start
// the span names of the conventions ("chat gpt-4o", "execute_tool
// get_weather", "invoke_agent planner").
var genAIOperations = []string{"invoke_agent", "create_agent", "chat", "text_completion", "generate_content", "execute_tool", "embeddings"}

// operationFromName returns the GenAI operation a span's name starts with,
// for spans of instrumentations that name the operation without the
// gen_ai.operation.name attribute; only spans with some gen_ai.* attribute
// qualify, so that an unrelated span named "chat …" is not taken.
func operationFromName(s *span) string {
	op, _, _ := strings.Cut(s.name, " ")
	for _, known := range genAIOperations {
		if op == known {
			for k := range s.a {
				if strings.HasPrefix(k, "gen_ai.") {
					return op
				}
			}
			return ""
		}
	}
	return ""
}

// legacyMessages reads the message forms that came before
// gen_ai.input.messages / gen_ai.output.messages: the gen_ai.prompt and
// gen_ai.completion JSON attributes (of the span, or of its
// gen_ai.content.prompt / gen_ai.content.completion events), and the
// indexed gen_ai.prompt.N.* / gen_ai.completion.N.* attributes that
// OpenLLMetry writes. It reports whether it found any.
func legacyMessages(u *unit, s *span) bool {
	a := s.a
	for _, e := range s.events {
		for _, k := range []string{"gen_ai.prompt", "gen_ai.completion"} {
			if _, ok := a[k]; !ok && e.a[k] != nil && (e.name == "gen_ai.content.prompt" || e.name == "gen_ai.content.completion") {
				a = copyAttrs(a)
				a[k] = e.a[k]
			}
		}
	}
	found := false
	if in, ok := a.jsonValue("gen_ai.prompt"); ok {
		for _, m := range list(in) {
			role, _ := field(m, "role").(string)
			msg := eventMessage(role, asMap(m))
			if role == "tool" && msg.callID == "" {
				msg.callID = asString(field(m, "tool_call_id"))
			}
			u.input = append(u.input, msg)
		}
		found = true
	} else if in := indexedMessages(a, "gen_ai.prompt."); len(in) > 0 {
		u.input, found = in, true
	}
	if out, ok := a.jsonValue("gen_ai.completion"); ok {
		if l := list(out); len(l) > 0 {
			m := eventMessage("assistant", asMap(l[0]))
			u.output = &m
		}
		found = true
	} else if out := indexedMessages(a, "gen_ai.completion."); len(out) > 0 {
		m := out[0]
		if m.role == "" {
			m.role = "assistant"
		}
		u.output, found = &m, true
	}
	return found
}

// indexedMessages reads PREFIX0.role, PREFIX0.content,
// PREFIX0.tool_call_id, PREFIX0.tool_calls.M.{id,name,arguments}, … in
// index order, stopping at the first index without a role or content.
func indexedMessages(a attrs, prefix string) []message {
	var out []message
	for i := 0; ; i++ {
		p := prefix + strconv.Itoa(i) + "."
		role, content := a.str(p+"role"), a[p+"content"]
		if role == "" && content == nil {
			return out
		}
		m := message{role: role, content: contentText(content)}
		if role == "tool" {
			m.callID = a.str(p + "tool_call_id")
		}
		for j := 0; ; j++ {
			cp := p + "tool_calls." + strconv.Itoa(j) + "."
			name := a.str(cp + "name")
			if name == "" {
				break
			}
			m.calls = append(m.calls, steptype.ToolCall{ID: a.str(cp + "id"), Name: name, Arguments: argsJSON(a[cp+"arguments"])})
		}
		out = append(out, m)
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
