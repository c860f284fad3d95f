package bedrock

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzEvents feeds an arbitrary byte stream through the frame reader and
// the accumulator: neither may panic, and a final response must carry
// valid JSON tool arguments.
func FuzzEvents(f *testing.F) {
	ev := func(typ, payload string) []byte {
		return encodeMessage(map[string]string{":message-type": "event", ":event-type": typ}, []byte(payload))
	}
	var seed []byte
	seed = append(seed, ev("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`)...)
	seed = append(seed, ev("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"a\":"}}}`)...)
	seed = append(seed, ev("messageStop", `{"stopReason":"tool_use"}`)...)
	f.Add(seed)
	f.Add(encodeMessage(map[string]string{":message-type": "exception", ":exception-type": "throttlingException"}, []byte(`{"message":"x"}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := &frameReader{r: bytes.NewReader(data)}
		var a accumulator
		for range 64 {
			m, err := fr.next()
			if err != nil {
				break
			}
			if _, err := a.event(m); err != nil {
				return
			}
		}
		for _, c := range a.final().ToolCalls {
			if !json.Valid(c.Arguments) {
				t.Fatalf("call %+v", c)
			}
		}
	})
}
