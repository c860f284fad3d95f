package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/steptype"
)

// A local OpenAI-compatible server (as Ollama, vLLM or llama.cpp would be)
// streams a reply; the example prints the deltas, then the totals.
func ExampleModel_Generate() {
	stream, _ := os.ReadFile("testdata/reasoning.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer srv.Close()

	m, err := openai.New(openai.Config{Model: "deepseek-reasoner", BaseURL: srv.URL + "/v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: "hi"}}}
	for r, err := range m.Generate(context.Background(), req) {
		if err != nil {
			fmt.Println("error:", err, "retry:", llm.Classify(err) == steptype.ErrorTransient)
			return
		}
		if r.Partial {
			fmt.Print(r.Content)
			continue
		}
		fmt.Printf("\nreasoning: %s\ntokens: %d in, %d out (%d reasoning)\n",
			r.Reasoning, r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.ReasoningTokens)
	}
	// Output:
	// Hello! How can I help?
	// reasoning: Okay, the user says hi. Reply briefly.
	// tokens: 13 in, 40 out (31 reasoning)
}
