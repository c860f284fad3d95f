package otlpingest_test

import (
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
)

// TestOlderGenAIForms: spans in the forms that came before the current
// GenAI conventions record the same steps as the current ones: the
// operation named only by the span name ("chat m", "execute_tool
// lookup"), gen_ai.system for the provider, the indexed
// gen_ai.prompt.N.* / gen_ai.completion.N.* attributes (OpenLLMetry), and
// the gen_ai.prompt / gen_ai.completion JSON of gen_ai.content.* events.
// A span named like an operation but without any gen_ai.* attribute is
// not taken.
func TestOlderGenAIForms(t *testing.T) {
	e := newEnv(t, server.Config{OTLP: otlpingest.Config{Settle: -1}})
	t0 := time.Now()
	at := func(s *tracepb.Span, d time.Duration) *tracepb.Span {
		s.StartTimeUnixNano, s.EndTimeUnixNano = uint64(t0.Add(d).UnixNano()), uint64(t0.Add(d+time.Millisecond).UnixNano())
		return s
	}
	conv := kv("gen_ai.conversation.id", "conv-legacy")
	chat1 := at(&tracepb.Span{TraceId: id(31, 16), SpanId: id(1, 8), Name: "chat m", Attributes: []*commonpb.KeyValue{conv,
		kv("gen_ai.system", "openai"), kv("gen_ai.request.model", "m"), kv("gen_ai.usage.prompt_tokens", 5), kv("gen_ai.usage.completion_tokens", 4),
		kv("gen_ai.prompt.0.role", "system"), kv("gen_ai.prompt.0.content", "Be brief."),
		kv("gen_ai.prompt.1.role", "user"), kv("gen_ai.prompt.1.content", "Look up 7."),
		kv("gen_ai.completion.0.role", "assistant"), kv("gen_ai.completion.0.tool_calls.0.id", "call_7"),
		kv("gen_ai.completion.0.tool_calls.0.name", "lookup"), kv("gen_ai.completion.0.tool_calls.0.arguments", `{"n":7}`)}}, 0)
	tool := at(&tracepb.Span{TraceId: id(31, 16), SpanId: id(2, 8), Name: "execute_tool lookup", Attributes: []*commonpb.KeyValue{conv,
		kv("gen_ai.tool.name", "lookup"), kv("gen_ai.tool.call.id", "call_7"), kv("gen_ai.tool.call.arguments", `{"n":7}`), kv("gen_ai.tool.call.result", "seven")}}, time.Second)
	chat2 := at(&tracepb.Span{TraceId: id(31, 16), SpanId: id(3, 8), Name: "chat m", Attributes: []*commonpb.KeyValue{conv,
		kv("gen_ai.system", "openai"), kv("gen_ai.request.model", "m"), kv("gen_ai.usage.input_tokens", 9), kv("gen_ai.usage.output_tokens", 2)},
		Events: []*tracepb.Span_Event{
			{Name: "gen_ai.content.prompt", Attributes: []*commonpb.KeyValue{kv("gen_ai.prompt",
				`[{"role":"user","content":"Look up 7."},{"role":"assistant","tool_calls":[{"id":"call_7","type":"function","function":{"name":"lookup","arguments":"{\"n\":7}"}}]},{"role":"tool","tool_call_id":"call_7","content":"seven"}]`)}},
			{Name: "gen_ai.content.completion", Attributes: []*commonpb.KeyValue{kv("gen_ai.completion", `[{"role":"assistant","content":"It is seven."}]`)}},
		}}, 2*time.Second)
	unrelated := at(&tracepb.Span{TraceId: id(31, 16), SpanId: id(4, 8), Name: "chat room join", Attributes: []*commonpb.KeyValue{kv("room", "7")}}, 3*time.Second)
	if code, body := e.post("/v1/traces", pb, export(chat1, tool, chat2, unrelated)); code != 200 {
		t.Fatalf("export: %d %s", code, body)
	}
	want := `1 user user role=user content="Look up 7."
2 llm llm role=assistant call=call_7:lookup:{"n":7} tokens=5/4 model=openai/m
3 tool tools role=tool content="seven" answers=call_7:lookup args={"n":7}
4 llm llm role=assistant content="It is seven." tokens=9/2 model=openai/m
`
	if got := render(e.waitSteps(otlpingest.SessionID("conv-legacy"), 4)); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
}
