package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// The online backup of docs/operations.md: VACUUM INTO from another
// connection (the sqlite3 shell, another process) while the store is open
// and writing yields a consistent database that opens as a store, with the
// steps, runs and vectors committed before it.
func TestOnlineBackupVacuumInto(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := open(t, sqlite.Config{Path: filepath.Join(dir, "live.db")})
	ctx := t.Context()
	if _, err := live.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		id := "step-" + itoa(i)
		if _, err := live.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: id, SessionID: "s",
			Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: id}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := live.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e",
			Vectors: []store.StepVector{{StepID: id, Vector: []float32{1, float32(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(dir, "backup.db")
	db := mustRawDB(t, filepath.Join(dir, "live.db"))
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, backup); err != nil {
		t.Fatalf("VACUUM INTO beside the open store: %v", err)
	}
	// The live store keeps writing; the backup does not change.
	if _, err := live.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "later", SessionID: "s",
		Kind: steptype.KindUser, Status: steptype.StepCompleted}}}); err != nil {
		t.Fatal(err)
	}
	restored := open(t, sqlite.Config{Path: backup})
	if n, err := restored.StepCount(ctx, &store.StepCountParams{SessionID: "s"}); err != nil || n != 20 {
		t.Errorf("restored backup: %d steps, %v; want 20", n, err)
	}
	if c, err := restored.VectorCount(ctx, &store.VectorCountParams{}); err != nil || len(c) != 1 || c[0].Count != 20 {
		t.Errorf("restored backup vectors: %+v, %v", c, err)
	}
}
