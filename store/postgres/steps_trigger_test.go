package postgres_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// An INSERT into steps keeps the session totals, the minute rollups and
// the metric hours with one PL/pgSQL call per statement (migration 00090),
// whatever the number of rows: three trigger functions and the hour
// invalidation's own function before, four calls.
func TestStepInsertOneTriggerCall(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	if _, err := conn.Exec(ctx, `SET search_path = `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	const hour = int64(3600e9) * 500000
	for _, q := range []string{
		`SET LOCAL track_functions = 'pl'`,
		// A folded hour the insert must invalidate, and one it must keep.
		`INSERT INTO metric_hours VALUES ($1::bigint, '', 1, 0, 0, 0, 0, 0, 0, '', 0, 0), ($1::bigint + 3600000000000, '', 1, 0, 0, 0, 0, 0, 0, '', 0, 0)`,
		`INSERT INTO steps (id, session_id, sequence, run_id, kind, status, created_at, body, role, input_tokens, cost)
		 VALUES ('a', 's1', 1, 'r', 'llm', 'completed', $1::bigint + 1, '{}', 'assistant', 10, 0.5),
			('b', 's1', 2, 'r', 'tool', 'completed', $1 + 2, '{}', 'tool', NULL, NULL),
			('c', 's1', 3, 'r', 'llm', 'failed', $1 + 60000000000, '{}', 'assistant', 5, 0.25)`,
	} {
		args := []any{hour}
		if q[0] == 'S' {
			args = nil
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	var calls int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(sum(pg_stat_get_xact_function_calls(p.oid)), 0) FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, schema).Scan(&calls); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("one INSERT of 3 steps made %d PL/pgSQL calls, want 1", calls)
	}
	var hours []int64
	rows, _ := tx.Query(ctx, `SELECT hour FROM metric_hours ORDER BY hour`)
	if hours, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	if len(hours) != 1 || hours[0] != hour+3600e9 {
		t.Errorf("metric hours left %v, want only the next hour %d", hours, hour+3600e9)
	}
	var stats, rollups string
	if err := tx.QueryRow(ctx, `SELECT COALESCE(string_agg(concat_ws(' ', kind, role, steps, input_tokens, cost), ', ' ORDER BY kind), '')
		FROM session_step_stats WHERE session_id = 's1'`).Scan(&stats); err != nil {
		t.Fatal(err)
	}
	// Three steps above the watermark: not folded (migration 00100); the
	// reader adds them.
	if stats != "" {
		t.Errorf("session_step_stats %q, want no row before a fold", stats)
	}
	if err := tx.QueryRow(ctx, `SELECT string_agg(concat_ws(' ', minute - $1, steps, errors, input_tokens, cost), ', ' ORDER BY minute)
		FROM step_rollups WHERE session_id = 's1'`, hour).Scan(&rollups); err != nil {
		t.Fatal(err)
	}
	if want := "0 2 0 10 0.5, 60000000000 1 1 5 0.25"; rollups != want {
		t.Errorf("step_rollups %q, want %q", rollups, want)
	}
}

// A session's totals are folded 256 steps at a time (migration 00100):
// session_step_stats holds exactly its steps up to stats_through, and a
// truncation below the watermark brings it down to the last step left, so
// that the sequences written again are read as the tail, not added one
// statement at a time.
func TestSessionStatsFoldWatermark(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	if _, err := conn.Exec(ctx, `SET search_path = `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	appendN := func(n int) {
		t.Helper()
		for i := 0; i < n; i += 10 {
			var batch []*steptype.Step
			for j := range min(10, n-i) {
				batch = append(batch, &steptype.Step{ID: fmt.Sprintf("s-%d-%d", n, i+j), SessionID: "s1", Kind: steptype.KindUser,
					Status: steptype.StepCompleted, Content: "x"})
			}
			if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(what string, through, folded int64) {
		t.Helper()
		var gotThrough, gotFolded int64
		if err := conn.QueryRow(ctx, `SELECT stats_through, (SELECT COALESCE(sum(steps), 0)::bigint FROM session_step_stats WHERE session_id = 's1')
			FROM sessions WHERE id = 's1'`).Scan(&gotThrough, &gotFolded); err != nil {
			t.Fatal(err)
		}
		if gotThrough != through || gotFolded != folded {
			t.Errorf("%s: stats_through %d with %d steps folded, want %d and %d", what, gotThrough, gotFolded, through, folded)
		}
	}
	appendN(250)
	want("250 steps", 0, 0)
	appendN(10) // the statement that reaches 260 folds them all
	want("260 steps", 260, 260)
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s1", StartSeq: 101}); err != nil {
		t.Fatal(err)
	}
	want("cut at 101", 100, 100)
	appendN(20)
	want("20 more", 100, 100)
}
