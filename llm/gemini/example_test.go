package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/steptype"
)

// A local stand-in for the Gemini API streams a sentence and two parallel
// function calls; the example prints the text deltas, then the calls.
func ExampleModel_Generate() {
	stream, _ := os.ReadFile("testdata/tools.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer srv.Close()

	m, err := gemini.New(gemini.Config{Model: "gemini-2.5-pro", BaseURL: srv.URL, APIKey: "AIza-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{
		Messages: []llm.Message{{Role: steptype.RoleUser, Content: "Weather in Paris and Tokyo?"}},
		Tools:    []llm.ToolDef{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"location":{"type":"string"}}}`)}},
	}
	for r, err := range m.Generate(context.Background(), req) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if r.Partial {
			fmt.Print(r.Content)
			continue
		}
		fmt.Println()
		for _, c := range r.ToolCalls {
			fmt.Printf("%s(%s)\n", c.Name, c.Arguments)
		}
		fmt.Printf("finish=%s input=%d output=%d\n", r.FinishReason, r.Usage.InputTokens, r.Usage.OutputTokens)
	}
	// Output:
	// Checking both cities.
	// get_weather({"location": "Paris"})
	// get_weather({"location": "Tokyo"})
	// finish=STOP input=120 output=30
}
