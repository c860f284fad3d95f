package openai_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/openai"
)

// BenchmarkGenerate measures the provider's overhead per call: building the
// request, the wire code, the HTTP round trip on loopback and decoding a short
// streamed reply with one tool call, against a server that answers at once.
func BenchmarkGenerate(b *testing.B) {
	stream := []byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Let me"},"finish_reason":null}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" check."},"finish_reason":null}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]},"finish_reason":null}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":12,"total_tokens":62,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

`)
	// A bare server: the recording one would add its own allocations.
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer s.Close()
	m, err := openai.New(openai.Config{Model: "gpt-4o-mini", BaseURL: s.URL + "/v1", APIKey: "sk-bench"})
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
