package openai_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// TestFakeRejectsMalformedSequences: the fake answers 400 like the real API
// to an assistant tool call without its result, and the provider reports a
// permanent error.
func TestFakeRejectsMalformedSequences(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New(fakeopenai.Config{})
	defer srv.Close()
	m, err := openai.New(openai.Config{Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1", APIKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: []llm.Message{
		{Role: steptype.RoleUser, Content: "go"},
		{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "echo", Arguments: []byte(`{}`)}, {ID: "c2", Name: "echo", Arguments: []byte(`{}`)}}},
		{Role: steptype.RoleTool, ToolCallID: "c1", Content: "1"},
		{Role: steptype.RoleUser, Content: "and?"},
	}}
	_, err = llm.Complete(context.Background(), m, req)
	var le *llm.Error
	if !errors.As(err, &le) || le.StatusCode != 400 || le.Class != steptype.ErrorPermanent || !strings.Contains(err.Error(), "c2") {
		t.Fatalf("malformed request: %v", err)
	}
	if len(srv.Rejected()) != 1 {
		t.Fatalf("rejected %v", srv.Rejected())
	}
}

// TestRetryAndForkAtEveryStepThroughOpenAI retries, forks and forks with an
// edit at every step of a session with a parallel tool call, through the
// OpenAI provider against the validating fake: every run completes and the
// fake never has to refuse a request.
func TestRetryAndForkAtEveryStepThroughOpenAI(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New(fakeopenai.Config{Iterations: 1, Parallel: 2})
	defer srv.Close()
	m, err := openai.New(openai.Config{Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1", APIKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{{Name: "a", Model: m, Tools: []tool.Tool{echo}}}})
	st := e.Store()
	ctx := context.Background()
	first, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "a", Input: "go"}))
	if err != nil || first.Status != steptype.RunCompleted {
		t.Fatalf("%+v %v", first, err)
	}
	orig, err := st.StepList(ctx, &store.StepListParams{SessionID: first.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(orig); got != "user,llm,tool,tool,llm" {
		t.Fatalf("session %s", got)
	}
	finish := func(what string, run *stepwise.Run, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r, err := e.Wait(ctx, e.Execute(ctx, run.ID))
		if err != nil || r.Status != steptype.RunCompleted {
			t.Fatalf("%s: %+v %v (rejected: %v)", what, r, err, srv.Rejected())
		}
	}
	for k := int64(1); k <= int64(len(orig)); k++ {
		run, err := e.Retry(ctx, stepwise.RetryParams{SessionID: first.SessionID, From: k})
		finish(fmt.Sprintf("retry at %d", k), run, err)
		for _, edit := range []*string{nil, new("edited")} {
			fork, err := e.Fork(ctx, stepwise.ForkParams{SessionID: first.SessionID, At: k, Edit: edit})
			if err != nil {
				t.Fatal(err)
			}
			run, err := e.StartRun(ctx, stepwise.StartParams{Agent: "a", SessionID: fork.ID, Input: "continue"})
			finish(fmt.Sprintf("fork at %d (edit %v)", k, edit != nil), run, err)
		}
	}
	if r := srv.Rejected(); len(r) != 0 {
		t.Fatalf("the fake refused %d requests: %v", len(r), r)
	}
}
