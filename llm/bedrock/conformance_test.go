package bedrock_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, conformance{}) }

// conformance speaks the ConverseStream event stream to the llmtest suite.
type conformance struct{}

func (conformance) Path() string        { return "/model/conformance-model/converse-stream" }
func (conformance) ContentType() string { return "application/vnd.amazon.eventstream" }

// Capabilities: the stream does not name the model that answered.
func (conformance) Capabilities() llmtest.Capabilities {
	return llmtest.Capabilities{Reasoning: true, CallIDs: true}
}

func (conformance) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
	t.Helper()
	creds := func(context.Context) (bedrock.Credentials, error) {
		return bedrock.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret"}, nil
	}
	m, err := bedrock.New(bedrock.Config{Model: "conformance-model", Region: "us-west-2", BaseURL: baseURL, Credentials: creds,
		HTTPClient: o.HTTPClient, Timeout: o.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// confEvent is one event message of the stream with payload v.
func confEvent(typ string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return bedrock.EncodeMessage(map[string]string{":message-type": "event", ":event-type": typ, ":content-type": "application/json"}, b)
}

func confDelta(index int, delta map[string]any) []byte {
	return confEvent("contentBlockDelta", map[string]any{"contentBlockIndex": index, "delta": delta})
}

func confStop(index int) []byte {
	return confEvent("contentBlockStop", map[string]any{"contentBlockIndex": index})
}

func (conformance) Stream(turn llmtest.Turn) llmtest.Stream {
	frames := [][]byte{confEvent("messageStart", map[string]any{"role": "assistant"})}
	index := 0
	if len(turn.Reasoning) > 0 {
		for _, r := range turn.Reasoning {
			frames = append(frames, confDelta(index, map[string]any{"reasoningContent": map[string]any{"text": r}}))
		}
		frames = append(frames, confDelta(index, map[string]any{"reasoningContent": map[string]any{"signature": "c2lnbmF0dXJl"}}), confStop(index))
		index++
	}
	if len(turn.Text) > 0 {
		for _, c := range turn.Text {
			frames = append(frames, confDelta(index, map[string]any{"text": c}))
		}
		frames = append(frames, confStop(index))
		index++
	}
	// The toolUse blocks start together and their input fragments
	// interleave.
	for i, c := range turn.Calls {
		frames = append(frames, confEvent("contentBlockStart", map[string]any{"contentBlockIndex": index + i,
			"start": map[string]any{"toolUse": map[string]any{"name": c.Name, "toolUseId": c.ID}}}))
	}
	for k := 0; ; k++ {
		more := false
		for i, c := range turn.Calls {
			if k < len(c.Args) {
				more = true
				frames = append(frames, confDelta(index+i, map[string]any{"toolUse": map[string]any{"input": c.Args[k]}}))
			}
		}
		if !more {
			break
		}
	}
	for i := range turn.Calls {
		frames = append(frames, confStop(index+i))
	}
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	u := turn.Usage
	frames = append(frames,
		confEvent("messageStop", map[string]any{"stopReason": stop}),
		confEvent("metadata", map[string]any{"metrics": map[string]any{"latencyMs": 100}, "usage": map[string]any{
			"inputTokens": u.InputTokens - u.CachedTokens, "cacheReadInputTokens": u.CachedTokens,
			"outputTokens": u.OutputTokens, "totalTokens": u.InputTokens + u.OutputTokens}}))
	return llmtest.Stream{Frames: frames, End: 2}
}

func (conformance) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]any{"message": message})
	return bedrock.EncodeMessage(map[string]string{":message-type": "exception", ":exception-type": "serviceUnavailableException", ":content-type": "application/json"}, b)
}

func (conformance) Malformed() []byte {
	return bedrock.EncodeMessage(map[string]string{":message-type": "event", ":event-type": "contentBlockDelta", ":content-type": "application/json"},
		[]byte(`{"contentBlockIndex":0,"delta":{"text":"th`))
}

// confExceptions are the exceptions the API answers with, by status.
var confExceptions = map[int]string{400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
	429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException"}

func (conformance) ErrorBody(status int, message string) []byte {
	v := map[string]any{"message": message}
	if exc, ok := confExceptions[status]; ok {
		v["__type"] = "com.amazon.coral.service#" + exc
	}
	b, _ := json.Marshal(v)
	return b
}
