package gemini_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
)

// BenchmarkGenerate measures the provider's overhead per call: building the
// request, the HTTP round trip on loopback and decoding a streamed reply
// with a sentence and two function calls, against a server that answers at
// once.
func BenchmarkGenerate(b *testing.B) {
	stream, err := os.ReadFile("testdata/tools.sse")
	if err != nil {
		b.Fatal(err)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer s.Close()
	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-flash", BaseURL: s.URL, APIKey: "bench"})
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
