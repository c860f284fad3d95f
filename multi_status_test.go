package stepwise_test

import (
	"context"
	"fmt"
	"net/url"
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

// pgPair is two engines on one PostgreSQL schema. Only A knows the agents
// (B claims nothing of theirs); B connects as its own role, so that a test
// can cut B's connections off and let them back.
type pgPair struct {
	a, b  *stepwise.Engine
	admin *pgx.Conn
	roleB string
}

func newPGPair(t *testing.T, agents ...*stepwise.Agent) *pgPair {
	t.Helper()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	n := time.Now().UnixNano()
	schema, role := fmt.Sprintf("stepwise_status_%d", n), fmt.Sprintf("stepwise_b_%d", n)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN SUPERUSER`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, `ALTER ROLE `+role+` LOGIN`)
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		_, _ = admin.Exec(ctx, `DROP ROLE IF EXISTS `+role)
		admin.Close(ctx)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	open := func(dsn string) store.Store {
		st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, err := stepwise.New(stepwise.Config{Store: open(dsn), Agents: agents, Owner: "instance-a", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other := &stepwise.Agent{Name: "other", Model: &fakeModel{fn: func(*llm.Request) (*llm.Response, error) { return &llm.Response{Content: "x"}, nil }}}
	b, err := stepwise.New(stepwise.Config{Store: open(u.String()), Agents: []*stepwise.Agent{other}, Owner: "instance-b", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	for _, e := range []*stepwise.Engine{a, b} {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return &pgPair{a: a, b: b, admin: admin, roleB: role}
}

// follow subscribes to a run's stream on e and forwards its events.
func follow(t *testing.T, e *stepwise.Engine, runID string) <-chan *stepwise.Event {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan *stepwise.Event, 256)
	go func() {
		defer close(ch)
		for ev, err := range e.Subscribe(ctx, stepwise.SubscribeParams{RunID: runID}) {
			if err != nil {
				return
			}
			ch <- ev
		}
	}()
	return ch
}

// await reads events until one satisfies ok, failing after 30s or when the
// stream ends first.
func await(t *testing.T, ch <-chan *stepwise.Event, what string, ok func(*stepwise.Event) bool) *stepwise.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatalf("%s: the stream ended first", what)
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("%s: not received within 30s", what)
		}
	}
}

// A run executed by instance A parks, then is cancelled: a run stream on B
// reports both (no step is committed by either change).
func TestRunStatusReachesOtherInstance(t *testing.T) {
	model := &fakeModel{fn: func(*llm.Request) (*llm.Response, error) {
		return &llm.Response{ToolCalls: []stepwise.ToolCall{call("q", stepwise.AskHumanTool, `{"question":"proceed?"}`)}}, nil
	}}
	p := newPGPair(t, &stepwise.Agent{Name: "ask", Model: model, Tools: []stepwise.Tool{stepwise.AskHuman()}})
	ctx := context.Background()
	run, err := p.a.StartRun(ctx, stepwise.StartParams{Agent: "ask", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	events := follow(t, p.b, run.ID)
	await(t, events, "run_waiting on B", func(ev *stepwise.Event) bool { return ev.Type == stepwise.EventRunWaiting })
	if _, err := p.a.Cancel(ctx, run.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	ev := await(t, events, "run_finished on B", func(ev *stepwise.Event) bool { return ev.Type == stepwise.EventRunFinished })
	if ev.Run == nil || ev.Run.Status != steptype.RunCancelled {
		t.Fatalf("run_finished on B = %+v, want cancelled", ev.Run)
	}
	if _, open := <-events; open {
		t.Fatal("the run stream went on after run_finished")
	}
}

// B's listening connection breaks, and while it cannot reconnect A commits
// the run's last step and finishes it: every notification of that is lost
// to B. Once B listens again it re-checks the store, and its run stream
// delivers the step and run_finished.
func TestListenerReconnectCatchesUp(t *testing.T) {
	release := make(chan struct{})
	model := &fakeModel{fn: func(*llm.Request) (*llm.Response, error) {
		<-release
		return &llm.Response{Content: "done"}, nil
	}}
	p := newPGPair(t, &stepwise.Agent{Name: "slow", Model: model})
	ctx := context.Background()
	run, err := p.a.StartRun(ctx, stepwise.StartParams{Agent: "slow", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	events := follow(t, p.b, run.ID)
	await(t, events, "the input step on B", func(ev *stepwise.Event) bool {
		return ev.Type == stepwise.EventStepCompleted && ev.Step.Kind == steptype.KindUser
	})
	// Cut B off: no new connection, and its listener's backend is gone.
	if _, err := p.admin.Exec(ctx, `ALTER ROLE `+p.roleB+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	var killed int
	if err := p.admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE usename = $1 AND query LIKE 'LISTEN %'`, p.roleB).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate B's listener: %d, %v", killed, err)
	}
	for {
		var left int
		if err := p.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND query LIKE 'LISTEN %'`, p.roleB).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	for {
		r, err := p.a.Store().RunGet(ctx, &store.RunGetParams{ID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == steptype.RunCompleted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.admin.Exec(ctx, `ALTER ROLE `+p.roleB+` LOGIN`); err != nil {
		t.Fatal(err)
	}
	await(t, events, "the llm step on B", func(ev *stepwise.Event) bool {
		return ev.Type == stepwise.EventStepCompleted && ev.Step.Kind == steptype.KindLLM
	})
	ev := await(t, events, "run_finished on B", func(ev *stepwise.Event) bool { return ev.Type == stepwise.EventRunFinished })
	if ev.Run.Status != steptype.RunCompleted || ev.Run.Output != "done" {
		t.Fatalf("run_finished on B = %+v", ev.Run)
	}
}
