package otlpingest

import (
	"sort"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
)

// openInference maps a span of the OpenInference conventions (Arize
// Phoenix instrumentations of LangChain, LlamaIndex, OpenAI…).
func openInference(s *span) *unit {
	u := &unit{convention: "openinference", session: s.a.str("session.id"), agent: s.a.str("agent.name")}
	switch kind := strings.ToUpper(s.a.str("openinference.span.kind")); kind {
	case "AGENT":
		u.role = roleRun
		if u.agent == "" {
			u.agent = s.name
		}
	case "LLM":
		u.role = roleLLM
		u.model = s.a.str("llm.model_name")
		u.provider = s.a.first("llm.provider", "llm.system")
		u.inTokens = s.a.num("llm.token_count.prompt")
		u.outTokens = s.a.num("llm.token_count.completion")
		u.cached = s.a.num("llm.token_count.prompt_details.cache_read")
		u.reasoning = s.a.num("llm.token_count.completion_details.reasoning")
		u.input = oiMessages(s.a, "llm.input_messages.")
		if out := oiMessages(s.a, "llm.output_messages."); len(out) > 0 {
			u.output = &out[0]
		} else {
			u.output = &message{role: "assistant", content: s.a.str("output.value")}
		}
		if len(u.output.calls) == 0 {
			u.output.calls = langChainToolCalls(s.a)
		}
	case "TOOL":
		u.role = roleTool
		u.toolName = s.a.first("tool.name", "tool_call.function.name")
		if u.toolName == "" {
			u.toolName = s.name
		}
		u.callID = s.a.first("tool_call.id", "tool.id")
		u.args = argsJSON(s.a.first("tool.parameters_value", "input.value"))
		u.result = rawJSON(s.a["output.value"])
		// LangChain serializes the ToolMessage: its content is the result
		// and it names the call.
		if out, ok := s.a.jsonValue("output.value"); ok {
			if m := lcKwargs(first(out, "output")); m == nil {
				if m = lcKwargs(out); m != nil {
					u.result, u.callID = rawJSON(contentText(m["content"])), firstNonEmpty(u.callID, asString(m["tool_call_id"]))
				}
			} else {
				u.result, u.callID = rawJSON(contentText(m["content"])), firstNonEmpty(u.callID, asString(m["tool_call_id"]))
			}
		}
	case "RETRIEVER", "RERANKER", "EMBEDDING", "GUARDRAIL", "EVALUATOR":
		u.role = roleCustom
		u.stepName = strings.ToLower(kind)
		u.args = rawJSON(s.a["input.value"])
		u.result = rawJSON(s.a["output.value"])
	default: // CHAIN and unknown kinds: framework plumbing
		u.role = roleIgnore
		if s.parentID == "" {
			u.role = roleRun
			u.agent = s.name
		}
	}
	return u
}

// oiMessages reads flattened messages: PREFIX<i>.message.role,
// .message.content, .message.contents.<j>.message_content.text,
// .message.tool_calls.<k>.tool_call.{id,function.name,function.arguments},
// .message.tool_call_id, .message.name.
func oiMessages(a attrs, prefix string) []message {
	type raw struct {
		fields map[string]any
	}
	byIdx := map[int]*raw{}
	for k, v := range a {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		idx, rest, ok := strings.Cut(k[len(prefix):], ".")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil {
			continue
		}
		r := byIdx[n]
		if r == nil {
			r = &raw{fields: map[string]any{}}
			byIdx[n] = r
		}
		r.fields[strings.TrimPrefix(rest, "message.")] = v
	}
	idxs := make([]int, 0, len(byIdx))
	for n := range byIdx {
		idxs = append(idxs, n)
	}
	sort.Ints(idxs)
	out := make([]message, 0, len(idxs))
	for _, n := range idxs {
		f := byIdx[n].fields
		m := message{role: asString(f["role"]), content: asString(f["content"]), callID: asString(f["tool_call_id"]), name: asString(f["name"])}
		if m.content == "" {
			m.content = indexedJoin(f, "contents.", ".message_content.text")
		}
		calls := map[int]*steptype.ToolCall{}
		for k, v := range f {
			rest, ok := strings.CutPrefix(k, "tool_calls.")
			if !ok {
				continue
			}
			idx, key, _ := strings.Cut(rest, ".")
			j, err := strconv.Atoi(idx)
			if err != nil {
				continue
			}
			c := calls[j]
			if c == nil {
				c = &steptype.ToolCall{Arguments: []byte(`{}`)}
				calls[j] = c
			}
			switch key {
			case "tool_call.id":
				c.ID = asString(v)
			case "tool_call.function.name":
				c.Name = asString(v)
			case "tool_call.function.arguments":
				c.Arguments = argsJSON(v)
			}
		}
		for j := 0; j < len(calls)+64 && len(m.calls) < len(calls); j++ {
			if c := calls[j]; c != nil {
				m.calls = append(m.calls, *c)
			}
		}
		out = append(out, m)
	}
	return out
}

// indexedJoin concatenates f[prefix<i>suffix] for i = 0, 1, ….
func indexedJoin(f map[string]any, prefix, suffix string) string {
	var b strings.Builder
	for i := 0; ; i++ {
		v, ok := f[prefix+strconv.Itoa(i)+suffix]
		if !ok {
			return b.String()
		}
		b.WriteString(asString(v))
	}
}

// langChainToolCalls reads the tool calls of a LangChain chat generation
// serialized in output.value (instrumentations that do not flatten them).
func langChainToolCalls(a attrs) []steptype.ToolCall {
	out, ok := a.jsonValue("output.value")
	if !ok {
		return nil
	}
	gens := list(field(out, "generations"))
	if len(gens) == 0 || len(list(gens[0])) == 0 {
		return nil
	}
	kw := lcKwargs(field(list(gens[0])[0], "message"))
	var calls []steptype.ToolCall
	for _, c := range list(kw["tool_calls"]) {
		calls = append(calls, steptype.ToolCall{ID: asString(field(c, "id")), Name: asString(field(c, "name")), Arguments: argsJSON(field(c, "args"))})
	}
	return calls
}

// lcKwargs returns the kwargs of a LangChain serialized object
// ({"lc":1,"type":"constructor","kwargs":{…}}), or nil.
func lcKwargs(v any) map[string]any {
	if field(v, "lc") == nil {
		return nil
	}
	m, _ := field(v, "kwargs").(map[string]any)
	return m
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
