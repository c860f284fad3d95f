package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// TestContextAt: GET /v1/sessions/{id}/context?at=SEQ rebuilds the request
// of step SEQ from the messages committed before it; bad values are 400.
func TestContextAt(t *testing.T) {
	t.Parallel()
	a := chatAgent("chat", "hello")
	a.Instructions = "Be brief."
	env := newEnv(t, []*stepwise.Agent{a})
	sid := finishedSession(t, env, "chat", "one", "two") // user, llm, user, llm
	for at, want := range map[int64]int{2: 1, 4: 3, 0: 4, 5: 4} {
		status, data := env.call("GET", fmt.Sprintf("/v1/sessions/%s/context?at=%d", sid, at), "")
		req := decode[llm.Request](t, data)
		if status != http.StatusOK || len(req.Messages) != want || req.System != "Be brief." {
			t.Fatalf("at=%d: %d %s", at, status, data)
		}
	}
	env.problem(http.StatusBadRequest, "invalid_parameter", "GET", "/v1/sessions/"+sid+"/context?at=9", "")
	env.problem(http.StatusBadRequest, "invalid_parameter", "GET", "/v1/sessions/"+sid+"/context?at=x", "")
}

// TestContextAtUnregisteredAgent: a session recorded by an agent this
// server does not run still shows the messages each step received.
func TestContextAtUnregisteredAgent(t *testing.T) {
	t.Parallel()
	env := newEnv(t, nil)
	ctx := context.Background()
	sess, err := env.eng.CreateSession(ctx, "elsewhere", "")
	if err != nil {
		t.Fatal(err)
	}
	steps := []*stepwise.Step{
		{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: "hi", Status: steptype.StepCompleted},
		{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "hello", Status: steptype.StepCompleted},
	}
	if _, err := env.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: steps}); err != nil {
		t.Fatal(err)
	}
	status, data := env.call("GET", "/v1/sessions/"+sess.ID+"/context?at=2", "")
	req := decode[llm.Request](t, data)
	if status != http.StatusOK || len(req.Messages) != 1 || req.Messages[0].Content != "hi" {
		t.Fatalf("%d %s", status, data)
	}
	env.problem(http.StatusNotFound, "unknown_agent", "GET", "/v1/sessions/"+sess.ID+"/context", "")
}

// TestContinueRun: POST /v1/runs {continue: true} runs the agent on an
// edited fork from its last message, without a new user step.
func TestContinueRun(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello")})
	ctx := context.Background()
	sid := finishedSession(t, env, "chat", "one")
	edit := "uno"
	fork, err := env.eng.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: 1, Edit: &edit})
	if err != nil {
		t.Fatal(err)
	}
	status, data := env.call("POST", "/v1/runs", `{"agent":"chat","session_id":"`+fork.ID+`","continue":true}`)
	if status != http.StatusCreated {
		t.Fatalf("%d %s", status, data)
	}
	env.waitRun(decode[wire.RunCreated](t, data).Run.ID, steptype.RunCompleted)
	got, err := env.store.StepList(ctx, &store.StepListParams{SessionID: fork.ID})
	if err != nil || len(got) != 2 || got[0].Content != "uno" || got[1].Kind != steptype.KindLLM {
		t.Fatalf("fork steps %v %v", got, err)
	}
	env.problem(http.StatusUnprocessableEntity, CodeInvalidArgument, "POST", "/v1/runs", `{"agent":"chat","session_id":"`+fork.ID+`","continue":true,"input":"x"}`)
	env.problem(http.StatusUnprocessableEntity, CodeInvalidArgument, "POST", "/v1/runs", `{"agent":"chat","continue":true}`)
}
