package gemini_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

type cityArgs struct {
	Location string `json:"location"`
}

// TestEngineToolLoopWithRetries runs an agent through the provider: two
// rate-limited attempts, a turn with parallel function calls, the tool
// step, and a final answer, each attempt recorded as a step.
func TestEngineToolLoopWithRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := llmtest.NewServer(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1, 2:
			llmtest.JSONError(429, `{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.001s"}]}}`)(w, r)
		case 3:
			llmtest.SSEFile(t, "tools.sse")(w, r)
		default:
			llmtest.SSEFile(t, "text.sse")(w, r)
		}
	})
	m := model(t, f, func(c *gemini.Config) { c.Model = "gemini-2.5-flash" })
	weather := tool.New("get_weather", "weather of a city", func(ctx context.Context, a cityArgs) (string, error) { return "sunny in " + a.Location, nil })
	st := memory.New()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "a", Model: m, Tools: []tool.Tool{weather},
		Retry: stepwise.RetryPolicy{MaxAttempts: 4, InitialInterval: time.Millisecond}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := t.Context()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "a", Input: "Weather in Paris and Tokyo?"}))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := st.StepList(ctx, &store.StepListParams{SessionID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range steps {
		kinds = append(kinds, string(s.Kind))
	}
	if run.Status != steptype.RunCompleted || strings.Join(kinds, ",") != "user,error,error,llm,tool,tool,llm" {
		t.Fatalf("status %s kinds %v", run.Status, kinds)
	}
	if s := steps[1]; s.Error.Class != steptype.ErrorTransient || s.Error.Code != "rate_limited" {
		t.Errorf("error step %+v", s.Error)
	}
	if s := steps[3]; s.Metrics.Provider != "gemini" || s.Metrics.Attempt != 3 || s.Metrics.InputTokens != 120 {
		t.Errorf("llm step metrics %+v", s.Metrics)
	}
	if s := steps[6]; s.Content != "Hello, world!" || s.Metrics.Cost <= 0 {
		t.Errorf("last step %q metrics %+v", s.Content, s.Metrics)
	}
	// The last request sent both results back in one user turn, in the
	// order the tools finished.
	body := f.Last(t).Body
	got := []any{llmtest.Field(body, "contents", 2, "parts", 0, "functionResponse", "response", "output"), llmtest.Field(body, "contents", 2, "parts", 1, "functionResponse", "response", "output")}
	if got[0] == got[1] || (got[0] != "sunny in Tokyo" && got[1] != "sunny in Tokyo") || (got[0] != "sunny in Paris" && got[1] != "sunny in Paris") {
		t.Errorf("last request %s", jsonOf(t, body))
	}
}
