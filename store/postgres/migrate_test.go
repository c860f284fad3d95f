package postgres_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// previousRelease is the schema version of the last release before the
// observation and vector tables (migration 00001 alone).
const previousRelease = 1

// A database written by the previous release — its schema, its rows —
// migrates forward when the new release opens it: the old sessions, runs
// and steps read back unchanged, and the new capabilities work on them.
func TestMigrateFromPreviousRelease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t)
	cfg := postgres.Config{DSN: pgtest.DSN(t), Schema: schema}
	if v, err := postgres.MigrateTo(ctx, cfg, previousRelease); err != nil || v != previousRelease {
		t.Fatalf("MigrateTo(%d) = %d, %v", previousRelease, v, err)
	}
	// Rows as the previous release wrote them, with its SQL.
	conn := schemaConn(t, schema)
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var steps []*steptype.Step
	for i, content := range []string{"what is the capital of France?", "Paris."} {
		s := &steptype.Step{ID: []string{"old-1", "old-2"}[i], SessionID: "old", RunID: "old-run", Sequence: int64(i + 1),
			Kind: steptype.KindUser, Status: steptype.StepCompleted, Role: steptype.RoleUser, Content: content, CreatedAt: now}
		if i == 1 {
			s.Metrics = steptype.Metrics{InputTokens: 120, OutputTokens: 7, CachedTokens: 100, Cost: 0.25}
		}
		body, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, s)
		if i == 0 {
			if _, err := conn.Exec(ctx, `INSERT INTO sessions (id, agent, last_seq, created_at, updated_at) VALUES ('old', 'a', 2, $1, $1)`, now.UnixNano()); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO runs (id, session_id, agent, status, step_count, created_at, updated_at, finished_at)
				VALUES ('old-run', 'old', 'a', 'completed', 2, $1, $1, $1)`, now.UnixNano()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, `INSERT INTO steps (id, session_id, sequence, run_id, kind, status, created_at, body)
			VALUES ($1, 'old', $2, 'old-run', 'user', 'completed', $3, $4)`, s.ID, s.Sequence, now.UnixNano(), body); err != nil {
			t.Fatal(err)
		}
	}

	st := open(t, cfg) // migrates to the current version
	files := migrationFiles(t)
	var applied int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM stepwise_schema WHERE version_id > 0 AND is_applied`).Scan(&applied); err != nil || applied != len(files) {
		t.Errorf("after open: %d migrations applied (%v), want %d", applied, err, len(files))
	}
	got, err := st.StepList(ctx, &store.StepListParams{SessionID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(steps)
	if g, _ := json.Marshal(got); string(g) != string(want) {
		t.Errorf("old steps after the upgrade:\n got %s\nwant %s", g, want)
	}
	if r, err := st.RunGet(ctx, &store.RunGetParams{ID: "old-run"}); err != nil || r.Status != steptype.RunCompleted || r.StepCount != 2 {
		t.Errorf("old run after the upgrade: %+v %v", r, err)
	}
	// Migration 75 filled the usage columns from the bodies (zeros as
	// NULL), and the
	// totals (migration 65) agree with them.
	var cols string
	if err := conn.QueryRow(ctx, `SELECT string_agg(format('%s:%s:%s:%s:%s:%s', id, role, input_tokens, output_tokens, cached_tokens, cost), ' ' ORDER BY sequence)
		FROM steps`).Scan(&cols); err != nil || cols != "old-1:user:::: old-2:user:120:7:100:0.25" {
		t.Errorf("usage columns after the upgrade = %q, %v", cols, err)
	}
	// The new tables work on the old rows.
	if _, err := st.EvalPut(ctx, &store.EvalPutParams{Eval: &store.Eval{ID: "ev", TargetKind: store.TargetStep, TargetID: "old-2",
		Name: "correct", Source: store.SourceUser, Score: 1}}); err != nil {
		t.Errorf("eval on an old step: %v", err)
	}
	miss, err := st.VectorMissing(ctx, &store.VectorMissingParams{Embedder: "e"})
	if err != nil || len(miss) != 2 {
		t.Fatalf("old steps without vectors: %d, %v", len(miss), err)
	}
	if _, err := st.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{
		{StepID: "old-1", Vector: []float32{1, 0}}, {StepID: "old-2", Vector: []float32{0, 1}}}}); err != nil {
		t.Fatal(err)
	}
	hits, err := st.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{0.1, 1}, K: 1})
	if err != nil || len(hits) != 1 || hits[0].Step.ID != "old-2" {
		t.Errorf("search over old steps: %v %v", hits, err)
	}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "new-3", SessionID: "old",
		Kind: steptype.KindUser, Status: steptype.StepCompleted}}}); err != nil {
		t.Errorf("append after the upgrade: %v", err)
	}
	// Deleting the old step with usage takes its usage off the totals.
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "old", StartSeq: 2}); err != nil {
		t.Fatal(err)
	}
	if stats, err := st.SessionStats(ctx, &store.SessionStatsParams{ID: "old"}); err != nil ||
		len(stats.Steps) != 1 || stats.Steps[0].Steps != 1 || stats.Steps[0].InputTokens != 0 || stats.Steps[0].Cost != 0 {
		t.Errorf("stats after truncating the old step with usage = %+v, %v", stats, err)
	}
	// Opening again finds nothing to do.
	open(t, cfg)
}

// A schema at migration 75 with a run, steps and an eval in past hours,
// written with that schema's SQL, is upgraded: migration 80 adds an empty
// hour table (nothing to backfill), which the first metrics query folds
// from the rows written before it, with the answer of a recomputation
// without it.
func TestMigrateMetricHours(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t)
	cfg := postgres.Config{DSN: pgtest.DSN(t), Schema: schema}
	if v, err := postgres.MigrateTo(ctx, cfg, 75); err != nil || v != 75 {
		t.Fatalf("MigrateTo(75) = %d, %v", v, err)
	}
	conn := schemaConn(t, schema)
	t0 := time.Date(2026, 2, 3, 10, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO sessions (id, agent, last_seq, created_at, updated_at) VALUES ('s', 'a', 5, $1, $1)`,
		`INSERT INTO runs (id, session_id, agent, status, step_count, created_at, updated_at, finished_at)
			VALUES ('r', 's', 'a', 'completed', 5, $1 + 60000000000, $1, $1 + 4200000000000)`,
		`INSERT INTO steps (id, session_id, sequence, run_id, kind, status, created_at, body, input_tokens, output_tokens, cost)
			SELECT 'x' || i, 's', i, 'r', 'llm', 'completed', $1 + i * 1200000000000, convert_to('{}', 'UTF8'), 10, 1, 0.5
			FROM generate_series(1, 5) i`,
		`INSERT INTO evals (id, session_id, run_id, target_kind, target_id, name, source, score, created_at, updated_at)
			VALUES ('e', 's', 'r', 'run', 'r', 'q', 'user', 0.75, $1 + 300000000000, $1 + 300000000000)`,
	} {
		if _, err := conn.Exec(ctx, q, t0.UnixNano()); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st := open(t, cfg) // migrates to the current version
	hours := func() (n int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM metric_hours`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := hours(); n != 0 {
		t.Fatalf("after the upgrade: %d rows in metric_hours, want none (folded lazily)", n)
	}
	query := func(split string) string {
		t.Helper()
		p := store.MetricsParams{From: t0, To: t0.Add(4 * time.Hour), Bucket: store.BucketHour, Split: split}
		if err := p.Normalize(); err != nil {
			t.Fatal(err)
		}
		m, err := st.Metrics(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m.Series)
		return string(b)
	}
	got := query("")
	if want := query("no_such_key"); got != want {
		t.Fatalf("metrics after the upgrade:\n got %s\nwant %s (recomputed without the hour table)", got, want)
	}
	if !strings.Contains(got, `"steps":2,`) || !strings.Contains(got, `"runs":1,`) || !strings.Contains(got, `"eval_score_avg":0.75`) {
		t.Fatalf("metrics = %s, want the steps, the run and the eval", got)
	}
	if n := hours(); n == 0 {
		t.Fatal("the first query after the upgrade folded no hour")
	}
}
