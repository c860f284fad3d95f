package stepwise_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// TestTwoInstancesOnPostgres runs two engines (two "processes") on one
// PostgreSQL database: a run started on A parks for input, is answered
// through B, and is finished by whichever instance claims it; a session
// subscriber on B sees every step committed by A (LISTEN/NOTIFY wake-up,
// store as the source of truth).
func TestTwoInstancesOnPostgres(t *testing.T) { testTwoInstances(t) }

// The same, with the answer published 300 ms after its commit: the run is
// resumed and finished meanwhile (by either instance), and the subscriber
// on B still gets the answer before the step that follows it.
func TestTwoInstancesAnswerPublishedLate(t *testing.T) {
	defer stepwise.SetTestHookAnswerPublish(func() { time.Sleep(300 * time.Millisecond) })()
	testTwoInstances(t)
}

func testTwoInstances(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	schema := fmt.Sprintf("stepwise_multi_%d", time.Now().UnixNano())
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
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("q", stepwise.AskHumanTool, `{"question":"proceed?"}`)}}, nil
		}
		return &llm.Response{Content: "answer was " + last.Content}, nil
	}}
	agent := func() *stepwise.Agent {
		return &stepwise.Agent{Name: "hitl", Model: model, Tools: []stepwise.Tool{stepwise.AskHuman()}}
	}
	a, err := stepwise.New(stepwise.Config{Store: open(), Agents: []*stepwise.Agent{agent()}, Owner: "instance-a", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stepwise.New(stepwise.Config{Store: open(), Agents: []*stepwise.Agent{agent()}, Owner: "instance-b", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := a.StartRun(ctx, stepwise.StartParams{Agent: "hitl", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	// B follows the session while A (or B) executes it.
	seen := make(chan *stepwise.Event, 64)
	subCtx, stopSub := context.WithCancel(ctx)
	defer stopSub()
	go func() {
		for ev, err := range b.Subscribe(subCtx, stepwise.SubscribeParams{SessionID: run.SessionID}) {
			if err != nil {
				return
			}
			if ev.Type == stepwise.EventStepCompleted {
				seen <- ev
			}
		}
	}()
	var pend []*stepwise.PendingInput
	for len(pend) == 0 {
		if ctx.Err() != nil {
			t.Fatal("run never waited for input")
		}
		time.Sleep(20 * time.Millisecond)
		pend, _ = b.Pending(ctx, run.ID)
	}
	if _, err := b.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: pend[0].RequestID, Answer: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	var final *stepwise.Run
	for {
		if ctx.Err() != nil {
			t.Fatal("run never finished")
		}
		r, _ := b.Store().RunGet(ctx, &store.RunGetParams{ID: run.ID})
		if r != nil && r.Status.Terminal() {
			final = r
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if final.Status != steptype.RunCompleted || final.Output != "answer was yes" {
		t.Fatalf("run %s %q", final.Status, final.Output)
	}
	// B's subscriber saw every committed step exactly once, in order.
	var seqs []string
	deadline := time.After(10 * time.Second)
	for len(seqs) == 0 || seqs[len(seqs)-1] != "4" {
		select {
		case ev := <-seen:
			if ev.Step.Status != steptype.StepWaiting {
				seqs = append(seqs, fmt.Sprint(ev.Step.Sequence))
			}
		case <-deadline:
			t.Fatalf("subscriber on B saw only %v", seqs)
		}
	}
	if strings.Join(seqs, ",") != "1,2,3,4" { // no duplicate delivery
		t.Fatalf("subscriber on B saw %v", seqs)
	}
}
