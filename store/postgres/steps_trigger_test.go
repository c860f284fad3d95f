package postgres_test

import (
	"errors"
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

// An INSERT of steps keeps the metric hours, the minute rollups and the
// session totals with no trigger (migration 00120): the group commit's
// statements (stepGroupInsertSQL) and the import's steps_inserted do the
// work, and both invalidate exactly the hours of their steps, append the
// rollup deltas of their steps and leave the totals to the fold.
func TestStepInsertKeepsTotalsWithoutTrigger(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	conn := schemaConn(t, schema)
	var triggers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'steps'::regclass AND NOT tgisinternal
		AND tgtype & 4 <> 0`).Scan(&triggers); err != nil || triggers != 0 {
		t.Fatalf("%d INSERT triggers on steps (%v), want none", triggers, err)
	}
	for _, id := range []string{"s1", "s2"} {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// Folded hours: those of the steps must go, the others stay.
	folded := func(hours ...int64) {
		t.Helper()
		for _, h := range hours {
			if _, err := conn.Exec(ctx, `INSERT INTO metric_hours VALUES ($1::bigint, '', 1, 0, 0, 0, 0, 0, 0, '', 0, 0)
				ON CONFLICT DO NOTHING`, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	left := func(what string, want ...int64) {
		t.Helper()
		rows, _ := conn.Query(ctx, `SELECT hour FROM metric_hours ORDER BY hour`)
		hours, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(hours) != fmt.Sprint(want) {
			t.Errorf("%s: metric hours left %v, want %v", what, hours, want)
		}
	}
	pending := func(what, sid string, base int64, want string) {
		t.Helper()
		var got string
		if err := conn.QueryRow(ctx, `SELECT COALESCE(string_agg(concat_ws(' ', minute - $1, run_id, steps, errors, input_tokens, output_tokens, cost),
			', ' ORDER BY minute, run_id), '') FROM step_rollups_pending WHERE session_id = $2`, base, sid).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: rollup deltas %q, want %q", what, got, want)
		}
	}
	steps := func(sid string, at time.Time) []*steptype.Step {
		return []*steptype.Step{
			{ID: sid + "-a", SessionID: sid, Sequence: 1, Kind: steptype.KindLLM, Status: steptype.StepCompleted, Role: "assistant",
				Content: "x", CreatedAt: at.Add(time.Nanosecond), Metrics: steptype.Metrics{InputTokens: 10, OutputTokens: 2, Cost: 0.5}},
			{ID: sid + "-b", SessionID: sid, Sequence: 2, Kind: steptype.KindTool, Status: steptype.StepCompleted, Role: "tool",
				Content: "x", CreatedAt: at.Add(2 * time.Nanosecond)},
			{ID: sid + "-c", SessionID: sid, Sequence: 3, Kind: steptype.KindLLM, Status: steptype.StepFailed, Role: "assistant",
				Content: "x", CreatedAt: at.Add(time.Minute), Metrics: steptype.Metrics{InputTokens: 5, Cost: 0.25}},
		}
	}

	// The import: steps of a past hour.
	const hour = int64(3600e9) * 480000
	folded(hour, hour+3600e9)
	if err := st.StepImport(ctx, &store.StepImportParams{Steps: steps("s1", time.Unix(0, hour))}); err != nil {
		t.Fatal(err)
	}
	left("after an import", hour+3600e9)
	pending("the import", "s1", hour, "0  2 0 10 2 0.5, 60000000000  1 1 5 0 0.25")

	// A group commit: its steps take the clock's time.
	now := time.Now().UnixNano()
	cur := now - now%3600e9
	folded(cur, cur+3600e9, cur+2*3600e9)
	out, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps("s2", time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	first, last := nanosOf(out[0].CreatedAt), nanosOf(out[2].CreatedAt)
	var want []int64
	for _, h := range []int64{hour + 3600e9, cur, cur + 3600e9, cur + 2*3600e9} {
		if h != first-first%3600e9 && h != last-last%3600e9 {
			want = append(want, h)
		}
	}
	left("after an append", want...)
	var rows, stepsIn int64
	if err := conn.QueryRow(ctx, `SELECT count(*), COALESCE(sum(steps), 0)::bigint FROM step_rollups_pending WHERE session_id = 's2'`).Scan(&rows, &stepsIn); err != nil {
		t.Fatal(err)
	}
	if stepsIn != 3 || rows < 1 || rows > 3 {
		t.Errorf("the append: %d rollup delta rows of %d steps, want 3 steps", rows, stepsIn)
	}
	var stats int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM session_step_stats`).Scan(&stats); err != nil || stats != 0 {
		t.Errorf("%d session_step_stats rows before a fold (%v), want none: the reader adds the tail", stats, err)
	}
}

func nanosOf(t time.Time) int64 { return t.UnixNano() }

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

// With no foreign key from steps to sessions (migration 00125), the
// writers refuse a missing session themselves and a session's delete
// still deletes its steps, their rollups and their deltas.
func TestStepsWithoutSessionForeignKey(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	conn := schemaConn(t, schema)
	orphan := &steptype.Step{ID: "o-1", SessionID: "nope", Sequence: 1, Kind: steptype.KindUser, Status: steptype.StepCompleted,
		Content: "x", CreatedAt: time.Unix(1700000000, 0)}
	if err := st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{orphan}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StepImport into a missing session: %v, want not found", err)
	}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "o-2", SessionID: "nope",
		Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "x"}}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StepAppend to a missing session: %v, want not found", err)
	}
	count := func(q string) int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM steps`); n != 0 {
		t.Fatalf("%d steps written for a missing session", n)
	}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	for i := range 300 { // past a fold of the totals
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: fmt.Sprintf("s-%d", i), SessionID: "s",
			Kind: steptype.KindLLM, Status: steptype.StepCompleted, Content: "x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT step_rollups_fold()`); err != nil {
		t.Fatal(err)
	}
	if n, m := count(`SELECT count(*) FROM step_rollups`), count(`SELECT count(*) FROM session_step_stats`); n == 0 || m == 0 {
		t.Fatalf("before the delete: %d rollup rows, %d totals rows; want both folded", n, m)
	}
	if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SELECT count(*) FROM steps`, `SELECT count(*) FROM step_rollups`, `SELECT count(*) FROM step_rollups_pending`,
		`SELECT count(*) FROM session_step_stats`} {
		if n := count(q); n != 0 {
			t.Errorf("%s after the session's delete: %d", q, n)
		}
	}
}
