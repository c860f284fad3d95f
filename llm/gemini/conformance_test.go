package gemini_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, fixture{}) }

// fixture speaks streamGenerateContent (alt=sse) to the llmtest suite.
type fixture struct{}

func (fixture) Path() string        { return "/v1beta/models/gemini-test:streamGenerateContent" }
func (fixture) ContentType() string { return "text/event-stream" }

// Capabilities: thought summaries stream as reasoning; the API sends no
// call ids, so the adapter makes them.
func (fixture) Capabilities() llmtest.Capabilities { return llmtest.Capabilities{Reasoning: true} }

func (fixture) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
	t.Helper()
	m, err := gemini.New(gemini.Config{Model: "gemini-test", BaseURL: baseURL, APIKey: "AIza-test", HTTPClient: o.HTTPClient, Timeout: o.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// chunk is one SSE event carrying a GenerateContentResponse.
func chunk(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return []byte("data: " + string(b) + "\r\n\r\n")
}

// parts is a chunk of one candidate with these parts.
func parts(model string, ps ...map[string]any) []byte {
	return chunk(map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}},
		"modelVersion": model, "responseId": "resp-1"})
}

// Stream writes a chunk per delta. Function calls arrive whole, one part
// each, as the API sends them; the last chunk has the finish reason and
// the usage.
func (fixture) Stream(turn llmtest.Turn) llmtest.Stream {
	var frames [][]byte
	for _, r := range turn.Reasoning {
		frames = append(frames, parts(turn.Model, map[string]any{"text": r, "thought": true}))
	}
	for _, c := range turn.Text {
		frames = append(frames, parts(turn.Model, map[string]any{"text": c}))
	}
	if len(turn.Calls) > 0 {
		var calls []map[string]any
		for _, c := range turn.Calls {
			fc := map[string]any{"name": c.Name}
			if len(c.Args) > 0 {
				fc["args"] = json.RawMessage(strings.Join(c.Args, ""))
			}
			calls = append(calls, map[string]any{"functionCall": fc})
		}
		frames = append(frames, parts(turn.Model, calls...))
	}
	u := turn.Usage
	frames = append(frames, chunk(map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": ""}}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens,
			"cachedContentTokenCount": u.CachedTokens, "totalTokenCount": u.InputTokens + u.OutputTokens},
		"modelVersion": turn.Model, "responseId": "resp-1"}))
	return llmtest.Stream{Frames: frames, End: 1}
}

func (fixture) StreamError(message string) []byte {
	return chunk(map[string]any{"error": map[string]any{"code": 503, "message": message, "status": "UNAVAILABLE"}})
}

func (fixture) Malformed() []byte {
	return []byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"th\r\n\r\n")
}

// statuses are the google.rpc codes by HTTP status.
var statuses = map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}

func (fixture) ErrorBody(status int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": message, "status": statuses[status]}})
	return b
}
