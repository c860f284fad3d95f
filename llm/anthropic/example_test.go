package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
	"github.com/stepwise-run/stepwise/steptype"
)

// A local stand-in for the Messages API streams a reply with a tool call;
// the example prints the text deltas, then the call.
func ExampleModel_Generate() {
	stream, _ := os.ReadFile("testdata/tool_use.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer srv.Close()

	m, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: srv.URL, APIKey: "sk-ant-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{
		Messages: []llm.Message{{Role: steptype.RoleUser, Content: "Weather in Paris?"}},
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
		for _, c := range r.ToolCalls {
			fmt.Printf("\n%s(%s) stop=%s\n", c.Name, c.Arguments, r.FinishReason)
		}
	}
	// Output:
	// I'll check the weather in Paris.
	// get_weather({"location": "Paris, France", "unit": "celsius", "days": [1, 2, 3]}) stop=tool_use
}
