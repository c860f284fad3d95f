package postgres_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	conn := schemaConn(t, schema)
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
	// The rollups' deltas appended, not yet folded (migration 00101).
	if err := tx.QueryRow(ctx, `SELECT string_agg(concat_ws(' ', minute - $1, steps, errors, input_tokens, cost), ', ' ORDER BY minute)
		FROM step_rollups_pending WHERE session_id = 's1'`, hour).Scan(&rollups); err != nil {
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
	conn := schemaConn(t, schema)
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

// The minute rollups are the sum of step_rollups and of the deltas not
// yet folded (step_rollups_all, migration 00101): after appends over many
// statements (so that folds run), imports over several minutes, a
// truncation, a session deleted and created again under its id and
// concurrent appends, they equal a recount of the steps, before and after
// a final fold, and folds did move deltas.
func TestStepRollupsEqualRecount(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	conn := schemaConn(t, schema)
	for _, id := range []string{"a", "c"} {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := st.SessionImport(ctx, &store.SessionImportParams{Session: &steptype.Session{ID: "b", LastSequence: 40,
		CreatedAt: at, UpdatedAt: at.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64 // the concurrent appends below number their steps too
	step := func(sid string, i int) *steptype.Step {
		n := seq.Add(1)
		k := steptype.KindLLM
		if i%5 == 0 {
			k = steptype.KindError
		}
		return &steptype.Step{ID: fmt.Sprintf("%s-%d", sid, n), SessionID: sid, Kind: k, Status: steptype.StepCompleted, Content: "x",
			Metrics: steptype.Metrics{InputTokens: int64(n % 97), OutputTokens: int64(n % 13), Cost: float64(n%7) / 8}}
	}
	appendN := func(sid string, statements int) {
		t.Helper()
		for i := range statements {
			batch := []*steptype.Step{step(sid, i)}
			if i%3 == 0 {
				batch = append(batch, step(sid, i+1))
			}
			if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch}); err != nil {
				t.Error(err)
				return
			}
		}
	}
	recount := func(what string) {
		t.Helper()
		const sum = `SELECT string_agg(concat_ws(' ', minute, session_id, run_id, steps, errors, input_tokens, output_tokens, cost), ', '
			ORDER BY minute, session_id, run_id) FROM (%s) t WHERE steps <> 0 OR errors <> 0`
		var got, want string
		if err := conn.QueryRow(ctx, fmt.Sprintf(sum, `SELECT minute, session_id, run_id, sum(steps) AS steps, sum(errors) AS errors,
			sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cost) AS cost FROM step_rollups_all GROUP BY 1, 2, 3`)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, fmt.Sprintf(sum, `SELECT created_at - created_at % 60000000000 AS minute, session_id, run_id, count(*) AS steps,
			count(*) FILTER (WHERE kind = 'error' OR status = 'failed') AS errors, COALESCE(sum(input_tokens), 0) AS input_tokens,
			COALESCE(sum(output_tokens), 0) AS output_tokens, COALESCE(sum(cost), 0) AS cost FROM steps GROUP BY 1, 2, 3`)).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: rollups\n%s\nwant the recount\n%s", what, got, want)
		}
	}
	appendN("a", 150)
	// Imported steps over several past minutes.
	var imported []*steptype.Step
	for i := range 40 {
		s := step("b", i)
		s.Sequence, s.CreatedAt = int64(i+1), at.Add(time.Duration(i)*20*time.Second)
		imported = append(imported, s)
	}
	for len(imported) > 0 {
		k := min(len(imported), 7)
		if err := st.StepImport(ctx, &store.StepImportParams{Steps: imported[:k]}); err != nil {
			t.Fatal(err)
		}
		imported = imported[k:]
	}
	appendN("b", 70)
	recount("after appends and imports")
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "a", StartSeq: 40}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "b", StartSeq: 20}); err != nil {
		t.Fatal(err)
	}
	recount("after truncations")
	appendN("c", 80)
	if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	recount("after a session deleted and created again")
	var wg sync.WaitGroup
	for _, sid := range []string{"a", "b", "c", "a", "c"} {
		wg.Go(func() { appendN(sid, 60) })
	}
	wg.Wait()
	recount("after concurrent appends")
	var folded, pending int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM step_rollups), (SELECT count(*) FROM step_rollups_pending)`).Scan(&folded, &pending); err != nil {
		t.Fatal(err)
	}
	if folded == 0 || pending == 0 {
		t.Errorf("%d rollup rows folded and %d deltas pending: want both (folds every 64 statements)", folded, pending)
	}
	if _, err := conn.Exec(ctx, `SELECT step_rollups_fold()`); err != nil {
		t.Fatal(err)
	}
	recount("after a fold")
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM step_rollups_pending`).Scan(&pending); err != nil || pending != 0 {
		t.Errorf("%d deltas left after a fold (%v)", pending, err)
	}
}
