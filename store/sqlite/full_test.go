package sqlite_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// A database at its size cap refuses writes with store.ErrStorageFull,
// stores nothing of the refused write, and goes on serving reads and
// writes that fit (a delete, once room is made).
func TestFullIsStorageFull(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "full.db"), MaxBytes: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 16<<10)
	var full error
	for i := range 200 {
		_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{
			ID: fmt.Sprintf("st%d", i), SessionID: "s1", Kind: steptype.KindUser, Status: steptype.StepCompleted, Role: steptype.RoleUser, Content: big + fmt.Sprint(i),
		}}})
		if err != nil {
			full = err
			break
		}
	}
	if !errors.Is(full, store.ErrStorageFull) {
		t.Fatalf("append past the cap: %v, want ErrStorageFull", full)
	}
	sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := st.StepList(ctx, &store.StepListParams{SessionID: "s1"})
	if err != nil || int64(len(steps)) != sess.LastSequence {
		t.Fatalf("after the refused append: %d steps, last sequence %d (%v)", len(steps), sess.LastSequence, err)
	}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2"}); err != nil && !errors.Is(err, store.ErrStorageFull) {
		t.Fatalf("a small write on a full database: %v", err)
	}
}
