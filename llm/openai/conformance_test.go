package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/llm/openai"
)

func TestConformance(t *testing.T) { llmtest.Run(t, fixture{}) }

// path is where the model posts chat completions.
const path = "/v1/chat/completions"

// model returns a Model pointed at s.
func model(t testing.TB, s *llmtest.Server, mods ...func(*openai.Config)) *openai.Model {
	t.Helper()
	cfg := openai.Config{Model: "gpt-test", BaseURL: s.URL + "/v1", APIKey: "sk-test"}
	for _, f := range mods {
		f(&cfg)
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fixture speaks the chat completions stream to the llmtest suite.
type fixture struct{}

func (fixture) Path() string        { return path }
func (fixture) ContentType() string { return "text/event-stream; charset=utf-8" }

func (fixture) Capabilities() llmtest.Capabilities {
	return llmtest.Capabilities{Reasoning: true, CallIDs: true, ModelID: true}
}

func (fixture) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
	t.Helper()
	m, err := openai.New(openai.Config{Model: "gpt-test", BaseURL: baseURL + "/v1", APIKey: "sk-test", HTTPClient: o.HTTPClient, Timeout: o.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// event is one "data:" event of JSON v.
func event(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// chunk is a chat.completion.chunk event with one choice.
func chunk(model string, delta map[string]any, finish any) []byte {
	return event(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
}

func (fixture) Stream(turn llmtest.Turn) llmtest.Stream {
	var frames [][]byte
	for _, r := range turn.Reasoning {
		frames = append(frames, chunk(turn.Model, map[string]any{"reasoning_content": r}, nil))
	}
	for _, c := range turn.Text {
		frames = append(frames, chunk(turn.Model, map[string]any{"content": c}, nil))
	}
	// Each call starts with its id, name and first fragment; the remaining
	// fragments of the calls interleave.
	for i, c := range turn.Calls {
		first := ""
		if len(c.Args) > 0 {
			first = c.Args[0]
		}
		frames = append(frames, chunk(turn.Model, map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": first}}}}, nil))
	}
	for k := 1; ; k++ {
		more := false
		for i, c := range turn.Calls {
			if k < len(c.Args) {
				more = true
				frames = append(frames, chunk(turn.Model, map[string]any{"tool_calls": []any{map[string]any{
					"index": i, "function": map[string]any{"arguments": c.Args[k]}}}}, nil))
			}
		}
		if !more {
			break
		}
	}
	finish := "stop"
	if len(turn.Calls) > 0 {
		finish = "tool_calls"
	}
	u := turn.Usage
	frames = append(frames,
		chunk(turn.Model, map[string]any{}, finish),
		event(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": turn.Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens,
				"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedTokens},
				"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens}}}),
		[]byte("data: [DONE]\n\n"))
	return llmtest.Stream{Frames: frames, End: 3}
}

func (fixture) StreamError(message string) []byte {
	return event(map[string]any{"error": map[string]any{"message": message, "type": "server_error", "param": nil, "code": nil}})
}

func (fixture) Malformed() []byte {
	return []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"th` + "\n\n")
}

func (fixture) ErrorBody(status int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "api_error", "param": nil, "code": nil}})
	return b
}
