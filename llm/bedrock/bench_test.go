package bedrock_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
)

// BenchmarkGenerate measures the provider's overhead per call: building and
// signing the request, the HTTP round trip on loopback and decoding an
// event stream with a sentence and two tool calls, against a server that
// answers at once.
func BenchmarkGenerate(b *testing.B) {
	stream := eventFile(b, "tools.events")
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		_, _ = w.Write(stream)
	}))
	defer s.Close()
	m, err := bedrock.New(bedrock.Config{Model: "anthropic.claude-haiku-4-5-20251001-v1:0", Region: "us-east-1", BaseURL: s.URL, Credentials: testCreds})
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
		if len(final.ToolCalls) != 2 {
			b.Fatalf("final %+v", final)
		}
	}
}
