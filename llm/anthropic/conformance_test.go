package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, fixture{}) }

// path is where the model posts messages.
const path = "/v1/messages"

// model returns a Model pointed at s.
func model(t testing.TB, s *llmtest.Server, mods ...func(*anthropic.Config)) *anthropic.Model {
	t.Helper()
	cfg := anthropic.Config{Model: "claude-test", BaseURL: s.URL, APIKey: "sk-ant-test"}
	for _, f := range mods {
		f(&cfg)
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fixture speaks the Messages API stream to the llmtest suite.
type fixture struct{}

func (fixture) Path() string        { return path }
func (fixture) ContentType() string { return "text/event-stream; charset=utf-8" }

func (fixture) Capabilities() llmtest.Capabilities {
	return llmtest.Capabilities{Reasoning: true, CallIDs: true, ModelID: true}
}

func (fixture) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
	t.Helper()
	m, err := anthropic.New(anthropic.Config{Model: "claude-test", BaseURL: baseURL, APIKey: "sk-ant-test", HTTPClient: o.HTTPClient, Timeout: o.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// event is one SSE event named after the "type" of v.
func event(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return []byte("event: " + v["type"].(string) + "\ndata: " + string(b) + "\n\n")
}

func blockStart(i int, block map[string]any) []byte {
	return event(map[string]any{"type": "content_block_start", "index": i, "content_block": block})
}

func blockDelta(i int, delta map[string]any) []byte {
	return event(map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
}

func blockStop(i int) []byte {
	return event(map[string]any{"type": "content_block_stop", "index": i})
}

func (fixture) Stream(turn llmtest.Turn) llmtest.Stream {
	u := turn.Usage
	frames := [][]byte{event(map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": turn.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.InputTokens - u.CachedTokens, "cache_creation_input_tokens": 0,
			"cache_read_input_tokens": u.CachedTokens, "output_tokens": 1}}})}
	index := 0
	if len(turn.Reasoning) > 0 {
		frames = append(frames, blockStart(index, map[string]any{"type": "thinking", "thinking": "", "signature": ""}))
		for _, r := range turn.Reasoning {
			frames = append(frames, blockDelta(index, map[string]any{"type": "thinking_delta", "thinking": r}))
		}
		frames = append(frames, blockDelta(index, map[string]any{"type": "signature_delta", "signature": "c2lnbmF0dXJl"}), blockStop(index))
		index++
	}
	if len(turn.Text) > 0 {
		frames = append(frames, blockStart(index, map[string]any{"type": "text", "text": ""}))
		for _, c := range turn.Text {
			frames = append(frames, blockDelta(index, map[string]any{"type": "text_delta", "text": c}))
		}
		frames = append(frames, blockStop(index))
		index++
	}
	// The tool_use blocks start together and their fragments interleave.
	for i, c := range turn.Calls {
		frames = append(frames, blockStart(index+i, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}))
	}
	for k := 0; ; k++ {
		more := false
		for i, c := range turn.Calls {
			if k < len(c.Args) {
				more = true
				frames = append(frames, blockDelta(index+i, map[string]any{"type": "input_json_delta", "partial_json": c.Args[k]}))
			}
		}
		if !more {
			break
		}
	}
	for i := range turn.Calls {
		frames = append(frames, blockStop(index+i))
	}
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	frames = append(frames,
		event(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.OutputTokens}}),
		event(map[string]any{"type": "message_stop"}))
	return llmtest.Stream{Frames: frames, End: 2}
}

func (fixture) StreamError(message string) []byte {
	return event(map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": message}})
}

func (fixture) Malformed() []byte {
	return []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"th\n\n")
}

// errorTypes are the API's error types by status.
var errorTypes = map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
	404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}

func (fixture) ErrorBody(status int, message string) []byte {
	typ, ok := errorTypes[status]
	if !ok {
		typ = "api_error"
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}, "request_id": "req_1"})
	return b
}
