package bedrock_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, fixture{}) }

// conformanceModel is the model the fixture's Model calls. Converse
// reports no model id, so the adapter reports the one it called: the
// suite's (llmtest's Text case expects "llmtest-model-2026").
const conformanceModel = "llmtest-model-2026"

// fixture speaks converse-stream (the binary event stream) to the llmtest
// suite.
type fixture struct{}

func (fixture) Path() string        { return "/model/" + conformanceModel + "/converse-stream" }
func (fixture) ContentType() string { return "application/vnd.amazon.eventstream" }

func (fixture) Capabilities() llmtest.Capabilities {
	return llmtest.Capabilities{Reasoning: true, CallIDs: true}
}

func (fixture) New(t testing.TB, baseURL string, o llmtest.Options) llm.Model {
	t.Helper()
	m, err := bedrock.New(bedrock.Config{Model: conformanceModel, Region: "us-west-2", BaseURL: baseURL, Credentials: testCreds, HTTPClient: o.HTTPClient, Timeout: o.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ev is one event message with the JSON of v as its payload.
func ev(typ string, v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return frame(typ, string(b))
}

func delta(i int, d map[string]any) []byte {
	return ev("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": d})
}

func (fixture) Stream(turn llmtest.Turn) llmtest.Stream {
	frames := [][]byte{ev("messageStart", map[string]any{"role": "assistant"})}
	index := 0
	if len(turn.Reasoning) > 0 {
		for _, r := range turn.Reasoning {
			frames = append(frames, delta(index, map[string]any{"reasoningContent": map[string]any{"text": r}}))
		}
		frames = append(frames, delta(index, map[string]any{"reasoningContent": map[string]any{"signature": "c2lnbmF0dXJl"}}),
			ev("contentBlockStop", map[string]any{"contentBlockIndex": index}))
		index++
	}
	if len(turn.Text) > 0 {
		for _, c := range turn.Text {
			frames = append(frames, delta(index, map[string]any{"text": c}))
		}
		frames = append(frames, ev("contentBlockStop", map[string]any{"contentBlockIndex": index}))
		index++
	}
	// The toolUse blocks start together and their input fragments interleave.
	for i, c := range turn.Calls {
		frames = append(frames, ev("contentBlockStart", map[string]any{"contentBlockIndex": index + i,
			"start": map[string]any{"toolUse": map[string]any{"toolUseId": c.ID, "name": c.Name}}}))
	}
	for k := 0; ; k++ {
		more := false
		for i, c := range turn.Calls {
			if k < len(c.Args) {
				more = true
				frames = append(frames, delta(index+i, map[string]any{"toolUse": map[string]any{"input": c.Args[k]}}))
			}
		}
		if !more {
			break
		}
	}
	for i := range turn.Calls {
		frames = append(frames, ev("contentBlockStop", map[string]any{"contentBlockIndex": index + i}))
	}
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	u := turn.Usage
	frames = append(frames,
		ev("messageStop", map[string]any{"stopReason": stop}),
		ev("metadata", map[string]any{"metrics": map[string]any{"latencyMs": 120}, "usage": map[string]any{
			"inputTokens": u.InputTokens - u.CachedTokens, "cacheReadInputTokens": u.CachedTokens,
			"outputTokens": u.OutputTokens, "totalTokens": u.InputTokens + u.OutputTokens}}))
	return llmtest.Stream{Frames: frames, End: 2}
}

func (fixture) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]string{"message": message})
	return frame("!serviceUnavailableException", string(b))
}

func (fixture) Malformed() []byte {
	return frame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"th`)
}

func (fixture) ErrorBody(status int, message string) []byte {
	b, _ := json.Marshal(map[string]string{"message": message})
	return b
}
