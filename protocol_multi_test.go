package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// TestNextStepAcrossInstances follows a run started on instance A through
// the client protocol on instance B (one PostgreSQL database, both
// executing): B delivers every step once, in order, the pending request,
// and after the answer (given through B) the rest and the result, woken by
// the other instance's notifications when it executes.
func TestNextStepAcrossInstances(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	schema := fmt.Sprintf("stepwise_proto_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	open := func() store.Store {
		st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		switch assistantTurns(req) {
		case 0:
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("q", stepwise.AskHumanTool, `{"question":"proceed?"}`)}}, nil
		}
		return &llm.Response{Content: "answer was " + req.Messages[len(req.Messages)-1].Content}, nil
	}}
	agent := func() *stepwise.Agent {
		return &stepwise.Agent{Name: "hitl", Model: model, Tools: []stepwise.Tool{stepwise.AskHuman()}, Limits: stepwise.Limits{MaxSteps: 10}}
	}
	a, err := stepwise.New(stepwise.Config{Store: open(), Agents: []*stepwise.Agent{agent()}, Owner: "instance-a", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := stepwise.New(stepwise.Config{Store: open(), Agents: []*stepwise.Agent{agent()}, Owner: "instance-b", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Both execute (a run may move between them); B's wake-ups for A's
	// commits come through LISTEN/NOTIFY.
	for _, e := range []*stepwise.Engine{a, b} {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run, err := a.StartRun(ctx, stepwise.StartParams{Agent: "hitl", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	inv := &stepwise.Invocation{RunID: run.ID, SessionID: run.SessionID}
	var got []string
	for {
		step, err := b.NextStep(ctx, inv)
		if errors.Is(err, stepwise.ErrRunFinished) {
			break
		}
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		switch s := step.(type) {
		case *stepwise.Continuation:
			got = append(got, fmt.Sprintf("%s %s %s next=%s", inv.Cursor, s.Step.Kind, s.Status, s.CurrentStep))
		case *stepwise.HumanInputRequest:
			got = append(got, inv.Cursor+" request "+s.Prompt)
			if _, err := a.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: s.RequestID, Answer: json.RawMessage(`"yes"`)}); err != nil {
				t.Fatal(err)
			}
		case *stepwise.Result:
			got = append(got, inv.Cursor+" result "+s.Value)
		default:
			t.Fatalf("%T %+v", step, step)
		}
		if len(got) > 10 {
			t.Fatalf("no end: %v", got)
		}
	}
	want := []string{"1:0 user running next=llm", "2:0 llm running next=tools", "3:0 request proceed?",
		"4:0 llm running next=end", "4:1 result answer was yes"}
	if !slices.Equal(got, want) {
		t.Fatalf("B read\n  %v\nwant\n  %v", got, want)
	}
}
