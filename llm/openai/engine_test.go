package openai_test

import (
	"context"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

type echoArgs struct {
	N int `json:"n"`
}

// runAgainst runs one agent turn through the OpenAI provider against the
// fake server and returns the run and its steps.
func runAgainst(t *testing.T, srv *fakeopenai.Server) (*stepwise.Run, []*stepwise.Step) {
	t.Helper()
	m, err := openai.New(openai.Config{Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1", APIKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{{Name: "a", Model: m, Tools: []tool.Tool{echo},
		Retry: stepwise.RetryPolicy{MaxAttempts: 4, InitialInterval: time.Millisecond}}}})
	st := e.Store()
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "a", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := st.StepList(ctx, &store.StepListParams{SessionID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	return run, steps
}

func kinds(ss []*stepwise.Step) string {
	var k []string
	for _, s := range ss {
		k = append(k, string(s.Kind))
	}
	return strings.Join(k, ",")
}

func TestEngineRetriesRateLimits(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New(fakeopenai.Config{Iterations: 1, FailFirst: 2, FailStatus: http.StatusTooManyRequests, FailBody: "Rate limit reached"})
	defer srv.Close()
	run, steps := runAgainst(t, srv)
	if run.Status != steptype.RunCompleted || kinds(steps) != "user,error,error,llm,tool,llm" {
		t.Fatalf("status %s kinds %s", run.Status, kinds(steps))
	}
	for _, s := range steps[1:3] {
		if s.Error.Class != steptype.ErrorTransient || s.Error.Code != "rate_limited" || !strings.Contains(s.Error.Message, "Rate limit reached") {
			t.Fatalf("error step %+v", s.Error)
		}
	}
	llm := steps[3]
	if llm.Metrics.InputTokens != 12 || llm.Metrics.CachedTokens != 4 || llm.Metrics.Cost <= 0 || llm.Metrics.Provider != "openai" || llm.Metrics.Attempt != 3 {
		t.Fatalf("llm metrics %+v", llm.Metrics)
	}
}

func TestEngineFailsOnBadRequest(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New(fakeopenai.Config{FailFirst: 100, FailStatus: http.StatusBadRequest, FailBody: "Invalid schema for function 'echo'"})
	defer srv.Close()
	run, steps := runAgainst(t, srv)
	if run.Status != steptype.RunFailed || kinds(steps) != "user,error" || srv.Calls() != 1 {
		t.Fatalf("status %s kinds %s calls %d", run.Status, kinds(steps), srv.Calls())
	}
	if steps[1].Error.Class != steptype.ErrorPermanent || !strings.Contains(run.Error.Message, "Invalid schema for function") {
		t.Fatalf("error %+v run error %+v", steps[1].Error, run.Error)
	}
}
