package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// Both floors of bench --floor run on a database that holds a step of a
// run: the product schema's on the file itself, the minimal schema's in a
// file of its own, removed after.
func TestFloors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	st := open(t, sqlite.Config{Path: path})
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "a", Status: steptype.RunRunning}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "x", SessionID: "s", RunID: "r",
		Kind: steptype.KindLLM, Status: steptype.StepCompleted}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for name, floor := range map[string]func() error{
		"product": func() error { _, err := sqlite.Floor(ctx, path, "NORMAL", 20); return err },
		"minimal": func() error { _, err := sqlite.FloorMinimal(ctx, path, "NORMAL", 20); return err },
	} {
		if err := floor(); err != nil {
			t.Fatalf("%s floor: %v", name, err)
		}
	}
	if m, _ := filepath.Glob(path + ".minimal*"); len(m) != 0 {
		t.Fatalf("the minimal floor left %v", m)
	}
	if _, err := sqlite.FloorMinimal(ctx, path, "NORMAL", 0); err == nil {
		t.Fatal("a minimal floor of 0 transactions ran")
	}
}
