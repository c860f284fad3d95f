package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
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
		t.Errorf("%d partials, want one per content chunk (16)", len(r.Partials))
	}
	for _, p := range r.Partials {
		if p.Content == "" || p.Usage != (llm.Usage{}) || p.FinishReason != "" || len(p.ToolCalls) != 0 {
			t.Errorf("partial carries more than a delta: %+v", p)
		}
	}
	wantUsage := llm.Usage{InputTokens: 2006, OutputTokens: 17, CachedTokens: 1920}
	if r.Final.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", r.Final.Usage, wantUsage)
	}
	if r.Final.FinishReason != "stop" || r.Final.Model != "gpt-4o-mini-2024-07-18" || r.Final.Partial {
		t.Errorf("final %+v", r.Final)
	}
	if len(r.Final.ToolCalls) != 0 {
		t.Errorf("tool calls %v", r.Final.ToolCalls)
	}
}

func TestGenerateToolCallSplitArguments(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "tool_call.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("weather in Paris?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	const args = `{"location":"Paris, France","unit":"celsius","days":[1,2,3]}`
	want := []steptype.ToolCall{{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Arguments: json.RawMessage(args)}}
	llmtest.AssertCalls(t, r.Final.ToolCalls, want)
	if r.Final.FinishReason != "tool_calls" || r.Final.Content != "" {
		t.Errorf("final %+v", r.Final)
	}
	// The deltas rebuild the call: id and name once, arguments in pieces.
	var got strings.Builder
	var ids, names []string
	fragments := 0
	for _, p := range r.Partials {
		for _, d := range p.ToolCallDeltas {
			if d.Index != 0 {
				t.Errorf("delta index %d", d.Index)
			}
			if d.ID != "" {
				ids = append(ids, d.ID)
			}
			if d.Name != "" {
				names = append(names, d.Name)
			}
			if d.Arguments != "" {
				fragments++
			}
			got.WriteString(d.Arguments)
		}
	}
	if got.String() != args || fragments < 10 {
		t.Errorf("argument deltas %q in %d fragments", got.String(), fragments)
	}
	if fmt.Sprint(ids, names) != "[call_DdmO9pD3xa9XTPNJ32zg2hcA] [get_weather]" {
		t.Errorf("ids %v names %v", ids, names)
	}
}

func TestGenerateParallelToolCallsInterleaved(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "parallel_tool_calls.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("weather and time in Tokyo?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	llmtest.AssertCalls(t, r.Final.ToolCalls, []steptype.ToolCall{
		{ID: "call_A", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)},
		{ID: "call_B", Name: "get_time", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`)},
	})
	if r.Final.Content != "Checking both." {
		t.Errorf("content %q", r.Final.Content)
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
	if r.Final.Usage.CachedTokens != 64 || r.Final.Usage.InputTokens != 120 || r.Final.Usage.OutputTokens != 40 {
		t.Errorf("usage %+v", r.Final.Usage)
	}
}

func TestGenerateReasoningContent(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "reasoning.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("hi"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	const reasoning = "Okay, the user says hi. Reply briefly."
	const content = "Hello! How can I help?"
	if r.Final.Reasoning != reasoning || r.Final.Content != content {
		t.Errorf("final reasoning %q content %q", r.Final.Reasoning, r.Final.Content)
	}
	if c, rs := r.Joined(); c != content || rs != reasoning {
		t.Errorf("partials join to content %q reasoning %q", c, rs)
	}
	// Usage on the finish chunk (DeepSeek) instead of a separate chunk.
	want := llm.Usage{InputTokens: 13, OutputTokens: 40, ReasoningTokens: 31}
	if r.Final.Usage != want || r.Final.Model != "deepseek-reasoner" {
		t.Errorf("usage %+v model %q", r.Final.Usage, r.Final.Model)
	}
}

func TestGenerateReasoningField(t *testing.T) {
	t.Parallel()
	// OpenRouter and recent vLLM name the field "reasoning".
	stream := `data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"qwen/qwen3-32b","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Think \"hard\"\u2026"},"finish_reason":null}]}

data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"qwen/qwen3-32b","choices":[{"index":0,"delta":{"content":"42","reasoning":null},"finish_reason":"stop"}]}

data: [DONE]

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Final.Reasoning != `Think "hard"…` || r.Final.Content != "42" {
		t.Errorf("final %+v", r.Final)
	}
}

func TestGenerateToolCallsAllAtIndexZero(t *testing.T) {
	t.Parallel()
	// Some servers send every parallel call whole, each at index 0.
	stream := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"b","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	llmtest.AssertCalls(t, r.Final.ToolCalls, []steptype.ToolCall{
		{ID: "call_1", Name: "a", Arguments: json.RawMessage(`{"x":1}`)},
		{ID: "call_2", Name: "b", Arguments: json.RawMessage(`{}`)},
	})
	if d := r.Partials[1].ToolCallDeltas[0]; d.Index != 1 || d.ID != "call_2" {
		t.Errorf("second call delta %+v, want index 1", d)
	}
}

func TestGenerateInvalidArgumentsBecomeString(t *testing.T) {
	t.Parallel()
	stream := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\": 1"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := string(r.Final.ToolCalls[0].Arguments); got != `"{\"x\": 1"` {
		t.Errorf("arguments %s, want the broken text as a JSON string", got)
	}
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

func TestGenerateFinishWithoutDone(t *testing.T) {
	t.Parallel()
	// A clean close after the finish chunk lost only "[DONE]": accepted.
	stream := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}

`
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(stream)))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	if r.Err != nil || r.Final == nil || r.Final.Content != "ok" {
		t.Fatalf("final %+v err %v", r.Final, r.Err)
	}
}

func TestGenerateMalformedChunk(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEFile(t, "bad_chunk.sse"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("?"))
	e := llmtest.AsError(t, r.Err)
	if e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || !strings.Contains(e.Message, "malformed stream chunk") {
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
