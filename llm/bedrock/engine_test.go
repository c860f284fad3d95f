package bedrock_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

type cityArgs struct {
	Location string `json:"location"`
}

// TestEngineToolLoopWithRetries runs an agent through the provider: a
// throttled attempt, an exception inside a stream, a turn with parallel
// tool calls, the tool steps and a final answer, each attempt a step.
func TestEngineToolLoopWithRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			llmtest.JSONError(429, `{"message":"Too many requests, please wait before trying again."}`, "X-Amzn-Errortype: ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")(w, r)
		case 2:
			serveEvents(append(frame("messageStart", `{"role":"assistant"}`), frame("!modelStreamErrorException", `{"message":"The model stream failed"}`)...))(w, r)
		case 3:
			serveEvents(eventFile(t, "tools.events"))(w, r)
		default:
			serveEvents(eventFile(t, "text.events"))(w, r)
		}
	})
	weather := tool.New("get_weather", "weather of a city", func(ctx context.Context, a cityArgs) (string, error) { return "sunny in " + a.Location, nil })
	st := memory.New()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "a", Model: f.model(t), Tools: []tool.Tool{weather},
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
		t.Errorf("first error %+v", s.Error)
	}
	if s := steps[2]; s.Error.Class != steptype.ErrorTransient || s.Error.Code != "model_error" {
		t.Errorf("second error %+v", s.Error)
	}
	if s := steps[3]; s.Metrics.Provider != "bedrock" || s.Metrics.Attempt != 3 || s.Metrics.InputTokens != 410 || len(s.ToolCalls) != 2 {
		t.Errorf("llm step %+v", s.Metrics)
	}
	// claude-sonnet-4-5 on Bedrock: 12 uncached + 20 cache writes at $3,
	// 100 cache reads at $0.30, 6 output at $15 per million.
	if s := steps[6]; s.Content != "Hello, world!" || s.Metrics.Cost < 0.000215 || s.Metrics.Cost > 0.000217 {
		t.Errorf("last step %q cost %v", s.Content, s.Metrics.Cost)
	}
	// Both results in one user turn, in the order the tools finished.
	body := f.last(t).body
	got := []any{llmtest.Field(body, "messages", 2, "content", 0, "toolResult", "content", 0, "text"), llmtest.Field(body, "messages", 2, "content", 1, "toolResult", "content", 0, "text")}
	if got[0] == got[1] || (got[0] != "sunny in Tokyo" && got[1] != "sunny in Tokyo") || (got[0] != "sunny in Paris" && got[1] != "sunny in Paris") {
		t.Errorf("last request %s", jsonOf(t, body))
	}
}
