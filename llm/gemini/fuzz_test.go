package gemini

import (
	"encoding/json"
	"testing"
)

// FuzzChunk feeds arbitrary chunks to the accumulator: it must never
// panic, and whatever it accepts must yield a final response whose tool
// calls carry valid JSON arguments and ids.
func FuzzChunk(f *testing.F) {
	f.Add([]byte(`{"candidates": [{"content": {"parts": [{"text": "Hi"}, {"functionCall": {"name": "f", "args": {"a": 1}}}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3}}`))
	f.Add([]byte(`{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": null}}]}}]}`))
	f.Add([]byte(`{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1e300s"}]}}`))
	f.Add([]byte(`{"promptFeedback": {"blockReason": "OTHER"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var a accumulator
		if _, err := a.chunk(data); err != nil {
			return
		}
		for _, c := range a.final().ToolCalls {
			if c.ID == "" || c.Name == "" || !json.Valid(c.Arguments) {
				t.Fatalf("call %+v from %q", c, data)
			}
		}
	})
}
