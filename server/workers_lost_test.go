package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/internal/workertest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/wire"
	"github.com/stepwise-run/stepwise/worker"
)

// TestWorkerTaskLostWithTheDatabase: a worker task is created lazily (no
// WAL flush of its own, docs/workers.md). PostgreSQL crashes after the
// task was handed to its worker and before anything flushed it, so the
// task is gone: the worker's report on it is refused (task_not_found), the
// waiting step makes the task again under a new id with the same
// idempotency key, and the run completes with one result of the step.
func TestWorkerTaskLostWithTheDatabase(t *testing.T) {
	t.Parallel()
	cl := pgtest.NewCluster(t)
	ctx := t.Context()
	// The WAL writer waits 10 s between writes: an unflushed commit is
	// certainly lost by the crash below.
	sql(t, cl.DSN(), `ALTER SYSTEM SET wal_writer_delay = '10s'`, `SELECT pg_reload_conf()`)
	st, err := postgres.Open(ctx, postgres.Config{DSN: cl.DSN()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var svc *worker.Service
	e := newEnvStore(t, st, nil, func(c *Config) {
		withWorkers(time.Minute)(c)
		svc = c.Workers
	})
	t.Cleanup(func() { _ = svc.Close() }) // before the store's close
	w := &workertest.Worker{URL: e.ts.URL, ID: "w1"}
	if _, err := w.Register(ctx, shopAgent()); err != nil {
		t.Fatal(err)
	}
	runID := e.startRun("shop", "buy")
	first := poll(t, w)
	if first.Name != "validate" || first.Token != 1 {
		t.Fatalf("first task = %+v", first)
	}
	if err := cl.Restart(); err != nil { // a crash: PostgreSQL's buffers are lost
		t.Fatal(err)
	}
	var n int
	if err := queryRow(t, cl.DSN(), `SELECT count(*) FROM tasks WHERE id = $1`, first.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the crash the lazily created task is there (%d rows, %v): the test's premise failed", n, err)
	}
	// The report on the lost task is refused, once the server reaches the
	// database again.
	retry(t, func() error {
		_, err := w.Complete(ctx, first, &wire.TaskComplete{Next: "llm", Content: "lost"})
		return err
	}, wire.CodeTaskNotFound)
	again := poll(t, w)
	if again.Name != "validate" || again.ID == first.ID || again.IdempotencyKey != first.IdempotencyKey {
		t.Fatalf("task made again = %+v, want validate under a new id with the key %s", again, first.IdempotencyKey)
	}
	if _, err := w.Complete(ctx, again, &wire.TaskComplete{Next: "llm", Content: "valid"}); err != nil {
		t.Fatal(err)
	}
	charge := poll(t, w)
	if _, err := w.Complete(ctx, charge, &wire.TaskComplete{Content: "charged", Output: json.RawMessage(`{"charged":true}`)}); err != nil {
		t.Fatal(err)
	}
	e.waitRun(runID, steptype.RunCompleted)
	steps, err := st.StepList(ctx, &store.StepListParams{RunID: runID, Kinds: []steptype.Kind{steptype.KindCustom}})
	if err != nil || len(steps) != 1 || steps[0].Content != "valid" || steps[0].Metadata[worker.MetaTask] != again.ID {
		t.Fatalf("custom steps = %v, %v; want the one result of the task made again (%s)", steps, err, again.ID)
	}
}

// sql runs statements on dsn outside any store.
func sql(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func queryRow(t *testing.T, dsn, q string, args ...any) pgx.Row {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn.QueryRow(t.Context(), q, args...)
}

// retry calls f until it fails with the problem code want, for up to 30 s
// of answers that the store is unavailable (the database restarting).
func retry(t *testing.T, f func() error, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		code := workertest.Code(err)
		if code == want {
			return
		}
		if time.Now().After(deadline) || (err != nil && code != wire.CodeStorageDown && code != "") || err == nil {
			t.Fatalf("got %v (code %q), want %s", err, code, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
