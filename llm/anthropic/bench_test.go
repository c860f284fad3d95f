package anthropic_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
)

// BenchmarkGenerate measures the provider's overhead per call: building the
// request, the wire code, the HTTP round trip on loopback and decoding a short
// streamed reply with one tool call, against a server that answers at once.
func BenchmarkGenerate(b *testing.B) {
	stream := []byte(`event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

`)
	// A bare server: the recording one would add its own allocations.
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer s.Close()
	m, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: s.URL, APIKey: "sk-ant-bench"})
	if err != nil {
		b.Fatal(err)
	}
	req := agentTurn()
	b.ReportAllocs()
	for b.Loop() {
		var final *llm.Response
		for r, err := range m.Generate(b.Context(), req) {
			if err != nil {
				b.Fatal(err)
			}
			final = r
		}
		if len(final.ToolCalls) != 1 {
			b.Fatalf("final %+v", final)
		}
	}
}
