package postgres_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// Each write of a run row makes at most one PL/pgSQL call (migration
// 00095): its creation, its claim and its finish made two, one and three
// before (the session's run counts, the metric hours of a finished run
// through metric_hours_row and metric_hours_touch, the agent check), and a
// write that changes neither the status nor a finished run's hour makes
// none. The writes themselves are checked: the session's run counts, and
// the hours invalidated by a finish, by a run of another agent than its
// session's, and by a deletion.
func TestRunWritesOneTriggerCall(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1", Agent: "a"}); err != nil {
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
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`); err != nil {
		t.Fatal(err)
	}
	const hour = int64(3600e9) * 500000
	calls := func() int64 {
		t.Helper()
		var n int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(sum(pg_stat_get_xact_function_calls(p.oid)), 0) FROM pg_proc p
			JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	hours := func() []int64 {
		t.Helper()
		rows, _ := tx.Query(ctx, `SELECT hour FROM metric_hours ORDER BY hour`)
		hs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	counts := func() string {
		t.Helper()
		var s string
		if err := tx.QueryRow(ctx, `SELECT COALESCE(string_agg(status || '=' || runs, ' ' ORDER BY status), '')
			FROM session_run_stats WHERE session_id = 's1'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Folded hours h0 … h3: a write must invalidate exactly the ones it
	// changes.
	if _, err := tx.Exec(ctx, `INSERT INTO metric_hours SELECT $1::bigint + i * 3600000000000, '', 1, 0, 0, 0, 0, 0, 0, '', 0, 0
		FROM generate_series(0, 3) i`, hour); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, sql string
		calls     int64
		counts    string
		hours     []int64 // left, as offsets from hour in hours
	}{
		{"create", `INSERT INTO runs (id, session_id, agent, status, created_at, updated_at) VALUES ('r1', 's1', 'a', 'queued', $1::bigint + 1, $1::bigint + 1)`,
			1, "queued=1", []int64{0, 1, 2, 3}},
		{"claim", `UPDATE runs SET status = 'running', lease_owner = 'o', lease_expires = $1::bigint + 99 WHERE id = 'r1'`,
			1, "queued=0 running=1", []int64{0, 1, 2, 3}},
		{"step", `UPDATE runs SET status = 'running', cursor = 'llm', step_count = step_count + 1, updated_at = $1::bigint + 2 WHERE id = 'r1'`,
			0, "queued=0 running=1", []int64{0, 1, 2, 3}},
		{"finish", `UPDATE runs SET status = 'completed', lease_owner = '', lease_expires = 0, finished_at = $1::bigint + 3 WHERE id = 'r1'`,
			1, "completed=1 queued=0 running=0", []int64{1, 2, 3}},
		{"other agent", `WITH r AS (INSERT INTO step_rollups VALUES ($1::bigint + 3600000000000, 's1', 'r2', 1, 0, 0, 0, 0))
			INSERT INTO runs (id, session_id, agent, status, created_at, updated_at, finished_at) VALUES ('r2', 's1', 'b', 'failed', $1::bigint, $1::bigint, $1::bigint + 7200000000000)`,
			1, "completed=1 failed=1 queued=0 running=0", []int64{3}},
		{"delete", `DELETE FROM runs WHERE id = 'r1' AND $1::bigint > 0`,
			1, "completed=0 failed=1 queued=0 running=0", []int64{3}},
	}
	for _, s := range steps {
		before := calls()
		if _, err := tx.Exec(ctx, s.sql, hour); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := calls() - before; n != s.calls {
			t.Errorf("%s: %d PL/pgSQL calls, want %d", s.name, n, s.calls)
		}
		if c := counts(); c != s.counts {
			t.Errorf("%s: session run counts %q, want %q", s.name, c, s.counts)
		}
		var left []int64
		for _, h := range hours() {
			left = append(left, (h-hour)/3600e9)
		}
		if fmt.Sprint(left) != fmt.Sprint(s.hours) {
			t.Errorf("%s: metric hours left %v, want %v", s.name, left, s.hours)
		}
	}
}
