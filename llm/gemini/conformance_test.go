package gemini_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, conformance{}) }

// conformance speaks the streamGenerateContent SSE stream to the llmtest
// suite.
type conformance struct{}

func (conformance) Path() string { return "/v1beta/models/gemini-test:streamGenerateContent" }

func (conformance) ContentType() string { return "text/event-stream" }

// Capabilities: thought summaries stream as reasoning; function calls
// carry no ids (the adapter makes them).
func (conformance) Capabilities() llmtest.Capabilities {
	return llmtest.Capabilities{Reasoning: true, ModelID: true}
}

func (conformance) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
	t.Helper()
	m, err := gemini.New(gemini.Config{Model: "gemini-test", BaseURL: baseURL, APIKey: "AIza-test", HTTPClient: o.HTTPClient, Timeout: o.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// confChunk is one "data:" event of a GenerateContentResponse with parts.
func confChunk(model string, parts []any, finish string, usage map[string]any) []byte {
	cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	v := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "r1"}
	if usage != nil {
		v["usageMetadata"] = usage
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return []byte("data: " + string(b) + "\n\n")
}

func (conformance) Stream(turn llmtest.Turn) llmtest.Stream {
	var frames [][]byte
	for _, r := range turn.Reasoning {
		frames = append(frames, confChunk(turn.Model, []any{map[string]any{"text": r, "thought": true}}, "", nil))
	}
	for _, c := range turn.Text {
		frames = append(frames, confChunk(turn.Model, []any{map[string]any{"text": c}}, "", nil))
	}
	// The API sends each function call whole, with its arguments as an
	// object.
	var calls []any
	for _, c := range turn.Calls {
		calls = append(calls, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": json.RawMessage(c.Arguments())}})
	}
	if len(calls) > 0 {
		frames = append(frames, confChunk(turn.Model, calls, "", nil))
	}
	u := turn.Usage
	frames = append(frames, confChunk(turn.Model, []any{map[string]any{"text": ""}}, "STOP", map[string]any{
		"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens - u.ReasoningTokens,
		"cachedContentTokenCount": u.CachedTokens, "thoughtsTokenCount": u.ReasoningTokens,
		"totalTokenCount": u.InputTokens + u.OutputTokens}))
	return llmtest.Stream{Frames: frames, End: 1}
}

func (conformance) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 503, "message": message, "status": "UNAVAILABLE"}})
	return []byte("data: " + string(b) + "\n\n")
}

func (conformance) Malformed() []byte {
	return []byte(`data: {"candidates": [{"content": {"parts": [{"text": "th` + "\n\n")
}

// confStatuses are the google.rpc status names by HTTP status.
var confStatuses = map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
	404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}

func (conformance) ErrorBody(status int, message string) []byte {
	name, ok := confStatuses[status]
	if !ok {
		name = "UNKNOWN"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": message, "status": name}})
	return b
}
