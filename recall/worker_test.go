package recall_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// opsModel deploys when asked to, searches its past steps when asked how,
// and answers with the last tool result.
func opsModel() *stepwisetest.Model {
	return &stepwisetest.Model{Reply: func(req *llm.Request) (*llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == steptype.RoleTool:
			return &llm.Response{Content: "done: " + last.Content}, nil
		case strings.Contains(last.Content, "how did we"):
			return &llm.Response{ToolCalls: []steptype.ToolCall{{ID: "c-search", Name: recall.ToolName, Arguments: json.RawMessage(`{"query":"deploy billing service"}`)}}}, nil
		case strings.Contains(last.Content, "deploy"):
			return &llm.Response{ToolCalls: []steptype.ToolCall{{ID: "c-deploy", Name: "deploy", Arguments: json.RawMessage(`{"service":"billing"}`)}}}, nil
		}
		return &llm.Response{Content: "ok"}, nil
	}}
}

func deployTool() tool.Tool {
	type args struct {
		Service string `json:"service"`
	}
	return tool.New("deploy", "Deploy a service.", func(ctx context.Context, a args) (string, error) {
		return "deployed " + a.Service + " v2.3 to eu-west-1", nil
	})
}

func count(t *testing.T, st store.Store, embedder string) int64 {
	t.Helper()
	totals, err := st.VectorCount(t.Context(), &store.VectorCountParams{Embedder: embedder})
	if err != nil {
		t.Fatal(err)
	}
	if len(totals) == 0 {
		return 0
	}
	return totals[0].Count
}

func run(t *testing.T, e *stepwise.Engine, input string) *stepwise.Run {
	t.Helper()
	r, err := e.Wait(t.Context(), e.Run(t.Context(), stepwise.StartParams{Agent: "ops", Input: input}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != steptype.RunCompleted {
		t.Fatalf("run %s: %s %+v", r.ID, r.Status, r.Error)
	}
	return r
}

// The headline: an agent's steps are embedded in the background as they
// commit, and a later run finds them with past_steps_search.
func TestAgentFindsItsPastSteps(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	emb := recall.DefaultEmbedder()
	// No periodic sweep: only the commit hook can embed the steps.
	w, err := recall.NewWorker(recall.WorkerConfig{Store: st, Embedder: emb, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	search, err := recall.NewTool(recall.ToolConfig{Store: st, Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "ops", Model: opsModel(), Tools: []stepwise.Tool{deployTool(), search}}}})
	w.Attach(e)
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })

	first := run(t, e, "deploy the billing service")
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// user, llm (tool call), tool, llm (answer).
	if n := count(t, st, emb.Name()); n != 4 {
		t.Fatalf("after the first run: %d vectors, want 4", n)
	}

	second := run(t, e, "how did we ship billing last time?")
	steps, err := st.StepList(t.Context(), &store.StepListParams{RunID: second.ID, Kinds: []steptype.Kind{steptype.KindTool}})
	if err != nil || len(steps) != 1 {
		t.Fatalf("tool steps of the second run: %v, %v", steps, err)
	}
	found := steps[0].Content
	for _, want := range []string{"session " + first.SessionID, "Action Purpose: call deploy", "deployed billing v2.3 to eu-west-1", "User: deploy the billing service"} {
		if !strings.Contains(found, want) {
			t.Errorf("past_steps_search result lacks %q:\n%s", want, found)
		}
	}
	if strings.Contains(found, second.SessionID) {
		t.Errorf("the search found steps of its own run:\n%s", found)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The second run's user and llm steps; not the search result.
	if n := count(t, st, emb.Name()); n != 7 {
		t.Errorf("after the second run: %d vectors, want 7", n)
	}
}

// flaky fails while failing is set.
type flaky struct {
	recall.Embedder
	failing atomic.Bool
	calls   atomic.Int64
}

func (f *flaky) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls.Add(1)
	if f.failing.Load() {
		return nil, errors.New("embedding service down")
	}
	return f.Embedder.Embed(ctx, texts)
}

func TestWorkerSweeps(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st) // committed before the worker starts: found by its first sweep
	emb := &flaky{Embedder: recall.DefaultEmbedder()}
	w, err := recall.NewWorker(recall.WorkerConfig{Store: st, Embedder: emb, SweepInterval: -1,
		AgentKinds: map[string][]steptype.Kind{"helper": {steptype.KindUser}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); !errors.Is(err, recall.ErrWorkerNotRunning) {
		t.Errorf("Flush before Start: %v", err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	if err := w.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Every step but helper's llm step l3.
	if n := count(t, st, emb.Name()); n != 6 {
		t.Fatalf("after the first sweep: %d vectors, want 6", n)
	}

	// A step notified while the embedder fails is retried by the sweep of
	// the next Flush.
	emb.failing.Store(true)
	s := &steptype.Step{ID: "u9", SessionID: "s-db", Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "rollback the migration"}
	stored, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{s}})
	if err != nil {
		t.Fatal(err)
	}
	w.Notify(stored[0])
	w.Notify(&steptype.Step{ID: "x", Kind: steptype.KindSystem}) // never embedded: ignored
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, st, emb.Name()); n != 6 {
		t.Fatalf("while failing: %d vectors, want 6", n)
	}
	emb.failing.Store(false)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, st, emb.Name()); n != 7 {
		t.Errorf("after recovery: %d vectors, want 7", n)
	}
	if err := w.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-w.Stopped()
	if err := w.Flush(t.Context()); !errors.Is(err, recall.ErrWorkerNotRunning) {
		t.Errorf("Flush after Stop: %v", err)
	}
}

func TestBackfill(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st)
	emb := recall.DefaultEmbedder()
	// A step that arrives with a vector of this embedder keeps it.
	carried := make([]float32, emb.Dim())
	carried[7] = 1
	if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{{ID: "v1", SessionID: "s-chat",
		Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "anything", Vector: carried, Embedder: emb.Name()}}}); err != nil {
		t.Fatal(err)
	}
	stats, err := recall.Backfill(t.Context(), recall.WorkerConfig{Store: st, Embedder: emb, Kinds: []steptype.Kind{steptype.KindUser, steptype.KindTool}})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Scanned != 6 || stats.Embedded != 6 || stats.Skipped != 0 {
		t.Errorf("first backfill: %+v, want 6 scanned (users and tools), 6 embedded", stats)
	}
	if again := backfill(t, st, emb); again.Scanned != 2 || again.Embedded != 2 {
		t.Errorf("second backfill with the default kinds: %+v, want the 2 llm steps", again)
	}
	hits, err := st.VectorSearch(t.Context(), &store.VectorSearchParams{Embedder: emb.Name(), Vector: carried, K: 1})
	if err != nil || hits[0].Step.ID != "v1" || hits[0].Distance > 1e-6 {
		t.Errorf("carried vector: %v, %v", hits, err)
	}
	for _, cfg := range []recall.WorkerConfig{
		{Store: st},
		{Embedder: emb},
		{Store: st, Embedder: emb, Kinds: []steptype.Kind{"thought"}},
		{Store: st, Embedder: emb, AgentKinds: map[string][]steptype.Kind{"a": {"thought"}}},
		{Store: st, Embedder: emb, BatchSize: -1},
	} {
		if _, err := recall.Backfill(t.Context(), cfg); err == nil {
			t.Errorf("Backfill(%+v) succeeded", cfg)
		}
	}
}
