package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestSearchEndpoint(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "The capital of France is Paris.")})
	// Before anything is embedded: no vectors → 404 with a clear problem.
	env.problem(404, CodeNotFound, "GET", "/v1/search?q=capital", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, _, err := env.c.StartRun(ctx, "chat", "What is the capital of France?")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(run.ID, steptype.RunCompleted)
	if _, err := recall.Backfill(ctx, recall.WorkerConfig{Store: env.store, Embedder: recall.DefaultEmbedder()}); err != nil {
		t.Fatal(err)
	}
	status, body := env.call("GET", "/v1/search?q=capital+of+France&k=2&kind=llm", "")
	if status != http.StatusOK {
		t.Fatalf("status %d %s", status, body)
	}
	var res recall.QueryWithSteps
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 || res.Steps[0].Step.Kind != steptype.KindLLM || res.Steps[0].Step.SessionID != run.SessionID {
		t.Fatalf("result %s", body)
	}
	// Bad input: no query, k out of range, unknown kind, unknown embedder.
	env.problem(400, CodeInvalidParam, "GET", "/v1/search", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/search?q=x&k=ten", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/search?q=x&kind=nope", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/search?q=x&embedder=nope", "")
	env.problem(422, CodeInvalidArgument, "GET", "/v1/search?q=x&k=0", "")
}
