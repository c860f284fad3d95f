package anthropic_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestGenerateText(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "text.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("capital of France?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Final == nil || r.AfterEnd != 0 {
		t.Fatalf("final=%v afterEnd=%d", r.Final, r.AfterEnd)
	}
	const want = `The capital of France is Paris. It has été called "la Ville Lumière" 🌟.`
	if r.Final.Content != want {
		t.Errorf("content %q, want %q", r.Final.Content, want)
	}
	if content, _ := r.Joined(); content != want {
		t.Errorf("partials join to %q", content)
	}
	if len(r.Partials) != 16 {
		t.Errorf("%d partials, want one per text_delta (16)", len(r.Partials))
	}
	for _, p := range r.Partials {
		if p.Content == "" || p.Usage != (llm.Usage{}) || p.FinishReason != "" || len(p.ToolCalls) != 0 {
			t.Errorf("partial carries more than a delta: %+v", p)
		}
	}
	// InputTokens counts the cache reads too, as OpenAI's prompt_tokens does.
	wantUsage := llm.Usage{InputTokens: 12 + 2048, OutputTokens: 19, CachedTokens: 2048}
	if r.Final.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", r.Final.Usage, wantUsage)
	}
	if r.Final.FinishReason != "end_turn" || r.Final.Model != "claude-sonnet-4-5-20250929" || r.Final.Partial {
		t.Errorf("final %+v", r.Final)
	}
}

func TestGenerateToolUseSplitInput(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "tool_use.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("weather in Paris?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	const args = `{"location": "Paris, France", "unit": "celsius", "days": [1, 2, 3]}`
	llmtest.AssertCalls(t, r.Final.ToolCalls, []steptype.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: json.RawMessage(args)}})
	if r.Final.Content != "I'll check the weather in Paris." || r.Final.FinishReason != "tool_use" {
		t.Errorf("final %+v", r.Final)
	}
	if r.Final.Usage != (llm.Usage{InputTokens: 472, OutputTokens: 89}) {
		t.Errorf("usage %+v", r.Final.Usage)
	}
	// The deltas rebuild the call: id and name first, then the input.
	var got strings.Builder
	var first llm.ToolCallDelta
	fragments := 0
	for _, p := range r.Partials {
		for _, d := range p.ToolCallDeltas {
			if d.Index != 0 {
				t.Errorf("delta index %d, want 0 (the first call, not content block 1)", d.Index)
			}
			if first.ID == "" {
				first = d
			}
			if d.Arguments != "" {
				fragments++
			}
			got.WriteString(d.Arguments)
		}
	}
	if first.ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || first.Name != "get_weather" || first.Arguments != "" {
		t.Errorf("first delta %+v", first)
	}
	if got.String() != args || fragments < 10 {
		t.Errorf("input deltas %q in %d fragments", got.String(), fragments)
	}
}

func TestGenerateParallelToolUseInterleaved(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "parallel_tool_use.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("weather and time in Tokyo?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	llmtest.AssertCalls(t, r.Final.ToolCalls, []steptype.ToolCall{
		{ID: "toolu_A", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)},
		{ID: "toolu_B", Name: "get_time", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`)},
	})
	if r.Final.Content != "Checking both." {
		t.Errorf("content %q (text given whole in content_block_start)", r.Final.Content)
	}
	perIndex := map[int]string{}
	for _, p := range r.Partials {
		for _, d := range p.ToolCallDeltas {
			perIndex[d.Index] += d.Arguments
		}
	}
	if perIndex[0] != `{"location":"Tokyo"}` || perIndex[1] != `{"timezone":"Asia/Tokyo"}` || len(perIndex) != 2 {
		t.Errorf("deltas by index %v", perIndex)
	}
	// Cache writes count as input, not as cached.
	if r.Final.Usage != (llm.Usage{InputTokens: 2100, OutputTokens: 120}) {
		t.Errorf("usage %+v", r.Final.Usage)
	}
}

func TestGenerateThinking(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "thinking.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("27 * 453?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	const reasoning = "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3"
	if r.Final.Reasoning != reasoning || r.Final.Content != "27 * 453 = 12,231" {
		t.Errorf("final reasoning %q content %q", r.Final.Reasoning, r.Final.Content)
	}
	if c, rs := r.Joined(); c != r.Final.Content || rs != reasoning {
		t.Errorf("partials join to content %q reasoning %q", c, rs)
	}
	if len(r.Partials) != 5 {
		t.Errorf("%d partials: the signature_delta must not yield one", len(r.Partials))
	}
	if r.Final.Usage != (llm.Usage{InputTokens: 45, OutputTokens: 312, ReasoningTokens: 280}) || r.Final.Model != "claude-opus-4-1-20250805" {
		t.Errorf("usage %+v model %s", r.Final.Usage, r.Final.Model)
	}
}

func TestGenerateToolInputGivenWhole(t *testing.T) {
	t.Parallel()
	// Some gateways send the input in content_block_start, with no deltas.
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"a","input":{"x":1}}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}

event: message_stop
data: {"type":"message_stop"}

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	llmtest.AssertCalls(t, r.Final.ToolCalls, []steptype.ToolCall{{ID: "toolu_1", Name: "a", Arguments: json.RawMessage(`{"x":1}`)}})
}

func TestGenerateTruncatedMidEvent(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "truncated.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	e := llmtest.AsError(t, r.Err)
	if e.Class != steptype.ErrorTransient || e.Code != "stream_truncated" {
		t.Errorf("error %+v", e)
	}
	if r.Final != nil || len(r.Partials) != 4 || r.AfterEnd != 0 {
		t.Errorf("final %v, %d partials, %d after the error", r.Final, len(r.Partials), r.AfterEnd)
	}
}

func TestGenerateTruncatedAfterMessageDelta(t *testing.T) {
	t.Parallel()
	// Everything but message_stop: still truncated.
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"ok"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if e := llmtest.AsError(t, r.Err); e.Code != "stream_truncated" || e.Class != steptype.ErrorTransient {
		t.Errorf("error %+v", e)
	}
}

func TestGenerateMalformedEvent(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "bad_chunk.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	e := llmtest.AsError(t, r.Err)
	if e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || !strings.Contains(e.Message, "malformed stream event") {
		t.Errorf("error %+v", e)
	}
	var syntax *json.SyntaxError
	if !errors.As(r.Err, &syntax) {
		t.Errorf("cause %T, want *json.SyntaxError", e.Err)
	}
	if r.Final != nil || len(r.Partials) != 1 || r.AfterEnd != 0 {
		t.Errorf("final %v, %d partials, %d after the error", r.Final, len(r.Partials), r.AfterEnd)
	}
}

func TestGenerateDeltaForUnknownBlock(t *testing.T) {
	t.Parallel()
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if e := llmtest.AsError(t, r.Err); e.Code != "bad_chunk" {
		t.Errorf("error %+v", e)
	}
}
