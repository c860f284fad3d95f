package recall_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// openStore opens a SQLite store in a fresh file.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "recall.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// history stores a small, known history: two agents, three sessions.
//
//	s-deploy (ops):  u1 user "deploy the billing service to production"
//	                 l1 llm  calls deploy {"service":"billing"}
//	                 t1 tool deploy → "deployed billing v2.3 to eu-west-1"
//	s-db (ops):      u2 user "the postgres migration failed with a lock timeout"
//	                 t2 tool run_sql → "ERROR: lock timeout on table invoices"
//	s-chat (helper): u3 user "write a haiku about autumn leaves"
//	                 l3 llm  "red leaves drift and fall"
func history(t testing.TB, st store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []struct{ id, agent string }{{"s-deploy", "ops"}, {"s-db", "ops"}, {"s-chat", "helper"}} {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: s.id, Agent: s.agent}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []*steptype.Step{
		{ID: "u1", SessionID: "s-deploy", RunID: "r1", Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "deploy the billing service to production"},
		{ID: "l1", SessionID: "s-deploy", RunID: "r1", Kind: steptype.KindLLM, Role: steptype.RoleAssistant,
			ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "deploy", Arguments: []byte(`{"service": "billing"}`)}}},
		{ID: "t1", SessionID: "s-deploy", RunID: "r1", Kind: steptype.KindTool, Role: steptype.RoleTool, ToolName: "deploy", ToolCallID: "c1",
			Inputs: []byte(`{"service":"billing"}`), Content: "deployed billing v2.3 to eu-west-1"},
		{ID: "u2", SessionID: "s-db", RunID: "r2", Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "the postgres migration failed with a lock timeout"},
		{ID: "t2", SessionID: "s-db", RunID: "r2", Kind: steptype.KindTool, Role: steptype.RoleTool, ToolName: "run_sql",
			Inputs: []byte(`{"sql":"ALTER TABLE invoices ADD COLUMN due date"}`), Content: "ERROR: lock timeout on table invoices"},
		{ID: "u3", SessionID: "s-chat", RunID: "r3", Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "write a haiku about autumn leaves"},
		{ID: "l3", SessionID: "s-chat", RunID: "r3", Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: "red leaves drift and fall"},
	}
	for i, s := range steps {
		s.Status = steptype.StepCompleted
		s.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{s}}); err != nil {
			t.Fatal(err)
		}
	}
}

// hitIDs lists the step ids of a result, best first.
func hitIDs(r *recall.QueryWithSteps) string {
	var out []string
	for _, h := range r.Steps {
		out = append(out, h.Step.ID)
	}
	return strings.Join(out, " ")
}

// backfill embeds the whole store with emb.
func backfill(t testing.TB, st store.Store, emb recall.Embedder) *recall.BackfillStats {
	t.Helper()
	stats, err := recall.Backfill(context.Background(), recall.WorkerConfig{Store: st, Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	return stats
}
