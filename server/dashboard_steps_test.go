package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// TestDashboardSteps: text search over step content across sessions, with
// filters and server-side sorting; a fork's inherited steps are found once
// (in the parent); bad parameters are 400.
func TestDashboardSteps(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello")})
	ctx := context.Background()
	a := finishedSession(t, env, "chat", "seven apples", "three pears")
	b := finishedSession(t, env, "chat", "Seven oranges")
	if _, err := env.eng.Fork(ctx, stepwise.ForkParams{SessionID: a, At: 2}); err != nil {
		t.Fatal(err)
	}
	sess, err := env.eng.CreateSession(ctx, "ingest", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: []*stepwise.Step{
		{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "cheap seven", Status: steptype.StepCompleted, Metrics: steptype.Metrics{Cost: 0.01, Model: "gpt-x"}, Metadata: map[string]any{"region": "eu"}},
		{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "dear seven", Status: steptype.StepCompleted, Metrics: steptype.Metrics{Cost: 0.5, Model: "gpt-y"}, Metadata: map[string]any{"region": "us"}},
		{Kind: steptype.KindError, Name: "llm", Status: steptype.StepFailed, Error: &steptype.StepError{Message: "429 seven", Class: steptype.ErrorTransient}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	search := func(query string) wire.StepHitPage {
		t.Helper()
		status, data := env.call("GET", "/v1/dashboard/steps?"+query, "")
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, status, data)
		}
		return decode[wire.StepHitPage](t, data)
	}
	if p := search("q=SEVEN"); p.Total != 5 || p.ScannedSessions != 4 {
		t.Fatalf("q=seven: total %d, scanned %d sessions: %+v", p.Total, p.ScannedSessions, p)
	}
	if p := search("q=seven&kind=user"); p.Total != 2 {
		t.Fatalf("kind=user: %d", p.Total)
	}
	if p := search("q=seven&sort=cost&dir=desc&limit=2"); p.Total != 5 || len(p.Steps) != 2 || p.Steps[0].Step.Content != "dear seven" || p.Steps[1].Step.Content != "cheap seven" {
		t.Fatalf("sorted by cost: %+v", p.Steps)
	}
	if p := search("q=seven&sort=cost&dir=desc&limit=2&offset=1"); len(p.Steps) != 2 || p.Steps[0].Step.Content != "cheap seven" {
		t.Fatalf("offset: %+v", p.Steps)
	}
	if p := search("meta=region%3Deu"); p.Total != 1 || p.Steps[0].Step.Content != "cheap seven" {
		t.Fatalf("meta: %+v", p.Steps)
	}
	if p := search("error_class=transient&status=failed"); p.Total != 1 || p.Steps[0].SessionID != sess.ID {
		t.Fatalf("error class: %+v", p.Steps)
	}
	if p := search("model=GPT-Y&min_cost=0.1"); p.Total != 1 {
		t.Fatalf("model and cost: %+v", p.Steps)
	}
	if p := search("q=oranges&agent=chat"); p.Total != 1 || p.Steps[0].SessionID != b {
		t.Fatalf("agent: %+v", p.Steps)
	}
	for _, bad := range []string{"sort=size", "dir=up", "status=done", "kind=nope", "error_class=odd", "meta=x", "from=yesterday", "min_cost=-1", "limit=999"} {
		env.problem(http.StatusBadRequest, "invalid_parameter", "GET", "/v1/dashboard/steps?"+bad, "")
	}
}
