package otlpingest

import (
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
)

// vercel maps a span of the Vercel AI SDK (experimental_telemetry).
func vercel(s *span) *unit {
	op := s.a.str("ai.operationId")
	u := &unit{convention: "vercel_ai", agent: s.a.str("ai.telemetry.functionId")}
	switch {
	case op == "ai.toolCall":
		u.role = roleTool
		u.toolName = s.a.str("ai.toolCall.name")
		u.callID = s.a.str("ai.toolCall.id")
		u.args = argsJSON(first(s.a, "ai.toolCall.args", "ai.toolCall.input"))
		u.result = rawJSON(first(s.a, "ai.toolCall.result", "ai.toolCall.output"))
	case strings.HasSuffix(op, ".doGenerate") || strings.HasSuffix(op, ".doStream"):
		u.role = roleLLM
		u.model = s.a.first("ai.response.model", "ai.model.id", "gen_ai.request.model")
		u.provider = s.a.first("ai.model.provider", "gen_ai.system")
		u.inTokens = s.a.num("ai.usage.inputTokens", "ai.usage.promptTokens", "gen_ai.usage.input_tokens")
		u.outTokens = s.a.num("ai.usage.outputTokens", "ai.usage.completionTokens", "gen_ai.usage.output_tokens")
		u.cached = s.a.num("ai.usage.cachedInputTokens")
		u.reasoning = s.a.num("ai.usage.reasoningTokens")
		if fr := s.a.str("ai.response.finishReason"); fr != "" {
			u.finish = []string{fr}
		}
		if msgs, ok := s.a.jsonValue("ai.prompt.messages"); ok {
			for _, m := range list(msgs) {
				u.input = append(u.input, vercelMessages(m)...)
			}
		}
		out := message{role: "assistant", content: s.a.first("ai.response.text", "ai.response.object"), reasoning: s.a.str("ai.response.reasoning")}
		if calls, ok := s.a.jsonValue("ai.response.toolCalls"); ok {
			for _, c := range list(calls) {
				out.calls = append(out.calls, steptype.ToolCall{ID: asString(field(c, "toolCallId")), Name: asString(field(c, "toolName")),
					Arguments: argsJSON(first(c, "input", "args"))})
			}
		}
		u.output = &out
	case op == "ai.generateText" || op == "ai.streamText" || op == "ai.generateObject" || op == "ai.streamObject":
		u.role = roleRun
	default:
		u.role = roleIgnore // embeddings and other ai.* operations
	}
	return u
}

// vercelMessages reads one prompt message of the AI SDK: content is a
// string or a list of parts (text, reasoning, tool-call, tool-result).
func vercelMessages(v any) []message {
	role := asString(field(v, "role"))
	c := field(v, "content")
	if s, ok := c.(string); ok {
		return []message{{role: role, content: s}}
	}
	m := message{role: role}
	var tools []message
	for _, p := range list(c) {
		switch asString(field(p, "type")) {
		case "text":
			m.content += asString(field(p, "text"))
		case "reasoning":
			m.reasoning += asString(field(p, "text"))
		case "tool-call":
			m.calls = append(m.calls, steptype.ToolCall{ID: asString(field(p, "toolCallId")), Name: asString(field(p, "toolName")),
				Arguments: argsJSON(first(p, "input", "args"))})
		case "tool-result":
			out := first(p, "output", "result")
			if v := field(out, "value"); v != nil && field(out, "type") != nil {
				out = v
			}
			tools = append(tools, message{role: "tool", callID: asString(field(p, "toolCallId")), name: asString(field(p, "toolName")), content: contentText(out)})
		}
	}
	if role == "tool" {
		return tools
	}
	return append([]message{m}, tools...)
}

// first returns the first present value of keys in a map.
func first(v any, keys ...string) any {
	for _, k := range keys {
		if x := field(v, k); x != nil {
			return x
		}
	}
	return nil
}
