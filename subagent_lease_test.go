package stepwise_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// A parent resumed after a crash can claim its run before the lease of its
// child run (held by the dead instance, or by an instance executing the
// child) expires. The sub-agent call used to commit "leased by another
// owner" as the call's result, a failure it did not have (found by the
// chaos test); it now waits for the child.
func TestSubAgentChildLeasedElsewhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, schema := pgtest.DSN(t), fmt.Sprintf("stepwise_child_%d", time.Now().UnixNano())
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	defer st.Close()
	sid, pid, cid := stepwise.NewID(), stepwise.NewID(), stepwise.NewID()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "root"}); err != nil {
		t.Fatal(err)
	}
	tools := "tools"
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: pid, SessionID: sid, Agent: "root", Status: steptype.RunQueued, Cursor: tools, Input: "go", CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{
		{ID: stepwise.NewID(), SessionID: sid, RunID: pid, Kind: steptype.KindUser, Name: "input", Status: steptype.StepCompleted, Role: steptype.RoleUser, Content: "go", CreatedAt: now},
		{ID: stepwise.NewID(), SessionID: sid, RunID: pid, Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
			ToolCalls: []steptype.ToolCall{call("s0", "helper", `{"input":"task for helper"}`)}, CreatedAt: now},
	}}); err != nil {
		t.Fatal(err)
	}
	// The child, leased by an instance that died a moment ago.
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{LeaseFor: 1500 * time.Millisecond, Run: &steptype.Run{
		ID: cid, SessionID: sid, Agent: "helper", ParentRunID: pid, ParentStepID: stepwise.NewID(), Hop: 1, Status: steptype.RunRunning,
		Input: "task for helper", Options: []byte(`{"tool_call_id":"s0"}`), LeaseOwner: "dead-instance", CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	helper := &stepwise.Agent{Name: "helper", Model: answer("H done")}
	root := &stepwise.Agent{Name: "root", Model: delegator("helper"), SubAgents: []*stepwise.Agent{helper}}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{root}, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The parent waits for its child (not failing the call); once the dead
	// instance's lease expires an executor takes the child, whose end
	// resumes the parent.
	for ev, err := range e.Subscribe(ctx, stepwise.SubscribeParams{RunID: pid}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == stepwise.EventRunFinished {
			break
		}
	}
	run, err := st.RunGet(ctx, &store.RunGetParams{ID: pid})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunCompleted || !strings.Contains(run.Output, "helper=H done") {
		t.Fatalf("parent %s, output %q", run.Status, run.Output)
	}
}
