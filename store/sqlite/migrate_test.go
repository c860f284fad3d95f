package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// A database written before migration 40 — two unfinished runs in one
// session (the defect it fixes), a waiting request with an expiry — is
// upgraded: the older run stays, the later one is cancelled with a reason,
// and the request is found by its expiry.
func TestMigrateRunInvariants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	st := open(t, sqlite.Config{Path: path})
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "first", SessionID: "s", Agent: "a", Status: steptype.RunWaiting, CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	in := &steptype.Step{ID: "ask", SessionID: "s", RunID: "first", Kind: steptype.KindInput, Status: steptype.StepWaiting,
		Inputs: []byte(`{"prompt":"?","expires_at":"` + t0.Add(time.Minute).Format(time.RFC3339Nano) + `"}`)}
	used := &steptype.Step{ID: "used", SessionID: "s", Kind: steptype.KindLLM, Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
		Metrics: steptype.Metrics{InputTokens: 120, OutputTokens: 7, CachedTokens: 100, Cost: 0.25}}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in, used}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// Back to the schema before migration 40 (and the later ones), with
	// the defect's data.
	db := mustRawDB(t, path)
	downAfter80(t, db)
	downTo(t, db, "00080_metric_hours.sql")
	downTo(t, db, "00075_step_usage_columns.sql")
	for _, q := range []string{
		`DELETE FROM stepwise_schema WHERE version_id = 80`,
		`DELETE FROM stepwise_schema WHERE version_id = 75`,
		`DROP TABLE context_checkpoints`, `DELETE FROM stepwise_schema WHERE version_id = 70`,
		`DROP TRIGGER runs_agent_stats_delete`, `DROP TRIGGER runs_agent_stats_change`, `DROP TRIGGER runs_agent_stats_insert`,
		`DROP TABLE agent_run_stats`, `DELETE FROM stepwise_schema WHERE version_id = 66`,
		`DROP INDEX runs_waiting`, `DROP TRIGGER runs_stats_delete`, `DROP TRIGGER runs_stats_status`, `DROP TRIGGER runs_stats_insert`,
		`DROP TRIGGER steps_stats_delete`, `DROP TRIGGER steps_stats_insert`, `DROP TABLE session_run_stats`,
		`DROP TABLE session_step_stats`, `DELETE FROM stepwise_schema WHERE version_id = 65`,
		`DROP INDEX runs_agent_status`, `DELETE FROM stepwise_schema WHERE version_id = 55`,
		`DROP INDEX steps_expiry`, `ALTER TABLE steps DROP COLUMN expires_at`, `DROP INDEX runs_one_unfinished`,
		`DELETE FROM stepwise_schema WHERE version_id = 40`,
		fmt.Sprintf(`INSERT INTO runs (id, session_id, agent, status, created_at, updated_at) VALUES ('second', 's', 'a', 'queued', %d, %d)`,
			t0.Add(time.Second).UnixNano(), t0.Add(time.Second).UnixNano()),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	st = open(t, sqlite.Config{Path: path})
	defer st.Close()
	first, _ := st.RunGet(ctx, &store.RunGetParams{ID: "first"})
	second, _ := st.RunGet(ctx, &store.RunGetParams{ID: "second"})
	if first.Status != steptype.RunWaiting || second.Status != steptype.RunCancelled || second.Error == nil || second.Error.Code != "duplicate_run" {
		t.Fatalf("after the upgrade: first %s, second %s %+v; want waiting, cancelled duplicate_run", first.Status, second.Status, second.Error)
	}
	// Migration 65 counted the rows written before it.
	stats, err := st.SessionStats(ctx, &store.SessionStatsParams{ID: "s"})
	if err != nil || fmt.Sprint(stats.Runs) != "map[cancelled:1 waiting:1]" || len(stats.Steps) != 2 || stats.Steps[0].Kind != steptype.KindInput || stats.Steps[0].Steps != 1 ||
		stats.Steps[1].InputTokens != 120 || stats.Steps[1].Role != steptype.RoleAssistant {
		t.Fatalf("session stats after the upgrade = %+v, %v", stats, err)
	}
	// Migration 75 filled the usage columns from the bodies.
	var cols string
	if err := mustRawDB(t, path).QueryRow(`SELECT group_concat(id || ':' || role || ':' || input_tokens || ':' || output_tokens || ':' ||
		cached_tokens || ':' || cost, ' ') FROM (SELECT * FROM steps ORDER BY sequence)`).Scan(&cols); err != nil || cols != "ask::0:0:0:0.0 used:assistant:120:7:100:0.25" {
		t.Fatalf("usage columns after the upgrade = %q, %v", cols, err)
	}
	due, err := st.StepExpiring(ctx, &store.StepExpiringParams{Before: t0.Add(time.Hour)})
	if err != nil || len(due) != 1 || due[0].ID != "ask" {
		t.Fatalf("expiring after the upgrade = %v, %v; want the request", due, err)
	}
	_, err = st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "third", SessionID: "s", Agent: "a"}})
	if !errors.Is(err, store.ErrSessionBusy) {
		t.Fatalf("a third run after the upgrade: %v, want ErrSessionBusy", err)
	}
}

// downTo runs the Down section of migration file name on db.
// downAfter80 rolls back the migrations after 00080, newest first.
func downAfter80(t *testing.T, db *sql.DB) {
	t.Helper()
	downTo(t, db, "00200_fold_rollups.sql")
	if _, err := db.Exec(`DELETE FROM stepwise_schema WHERE version_id = 200`); err != nil {
		t.Fatal(err)
	}
	downTo(t, db, "00115_tasks.sql")
	if _, err := db.Exec(`DELETE FROM stepwise_schema WHERE version_id = 115`); err != nil {
		t.Fatal(err)
	}
}

func downTo(t *testing.T, db *sql.DB, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("migrations", name))
	if err != nil {
		t.Fatal(err)
	}
	_, down, ok := strings.Cut(string(b), "-- +goose Down")
	if !ok {
		t.Fatalf("%s has no Down section", name)
	}
	if _, err := db.Exec(down); err != nil {
		t.Fatalf("%s down: %v", name, err)
	}
}

// A database at migration 75 with runs, steps and evals in past hours is
// upgraded: migration 80 adds an empty hour table (nothing to backfill),
// which the first metrics query folds from the rows written before it,
// with the same answer as before the upgrade; a read-only store (which
// does not migrate) answers on the old schema too.
func TestMigrateMetricHours(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	st := open(t, sqlite.Config{Path: path})
	t0 := time.Date(2026, 2, 3, 10, 0, 0, 0, time.UTC)
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s", Agent: "a", Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "a", Status: steptype.RunCompleted,
		CreatedAt: t0.Add(time.Minute), FinishedAt: t0.Add(70 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	var steps []*steptype.Step
	for i := range 5 {
		steps = append(steps, &steptype.Step{ID: fmt.Sprintf("x%d", i), SessionID: "s", RunID: "r", Kind: steptype.KindLLM, Status: steptype.StepCompleted,
			CreatedAt: t0.Add(time.Duration(i) * 20 * time.Minute), Metrics: steptype.Metrics{InputTokens: 10, OutputTokens: 1, Cost: 0.5}})
	}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	query := func(st *sqlite.Store) string {
		t.Helper()
		p := store.MetricsParams{From: t0, To: t0.Add(4 * time.Hour), Bucket: store.BucketHour}
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
	before := query(st)
	st.Close()
	db := mustRawDB(t, path)
	downAfter80(t, db)
	downTo(t, db, "00080_metric_hours.sql")
	if _, err := db.Exec(`DELETE FROM stepwise_schema WHERE version_id = 80`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// A read-only store does not migrate: on the old schema it reads
	// without the table.
	ro := open(t, sqlite.Config{Path: path, ReadOnly: true})
	if got := query(ro); got != before {
		t.Fatalf("metrics of a read-only store on the old schema:\n got %s\nwant %s", got, before)
	}
	ro.Close()
	st = open(t, sqlite.Config{Path: path})
	defer st.Close()
	hours := func() (n int) {
		t.Helper()
		raw := mustRawDB(t, path)
		defer raw.Close()
		if err := raw.QueryRow(`SELECT count(*) FROM metric_hours`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := hours(); n != 0 {
		t.Fatalf("after the upgrade: %d rows in metric_hours, want none (folded lazily)", n)
	}
	if got := query(st); got != before {
		t.Fatalf("metrics after the upgrade:\n got %s\nwant %s", got, before)
	}
	if !strings.Contains(before, `"steps":2,`) || !strings.Contains(before, `"runs":1,`) {
		t.Fatalf("metrics = %s, want the steps and the run", before)
	}
	if n := hours(); n == 0 {
		t.Fatal("the first query after the upgrade folded no hour")
	}
}
