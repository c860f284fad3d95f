package memory

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// checkRunIndex fails unless every run's rows in the step index are exactly
// the indexed steps of that run, each at its recorded place.
func checkRunIndex(t *testing.T, m *Store, when string) {
	t.Helper()
	want := map[string][]string{}
	m.steps.each(func(id string, r *stepRow) bool {
		want[r.runID()] = append(want[r.runID()], id)
		return true
	})
	got := map[string][]string{}
	for i := range m.steps.runs {
		for run, rr := range m.steps.runs[i].m {
			for pos, r := range rr.rows {
				if r.runPos != pos {
					t.Fatalf("%s: row %s of run %s at %d records place %d", when, r.id(), run, pos, r.runPos)
				}
				if r.runID() != run {
					t.Fatalf("%s: row %s of run %s listed under run %s", when, r.id(), r.runID(), run)
				}
				got[run] = append(got[run], r.id())
			}
		}
	}
	for run := range want {
		slices.Sort(want[run])
		slices.Sort(got[run])
	}
	for run := range got {
		slices.Sort(got[run])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: steps by run\n%v\nwant (from the id index)\n%v", when, got, want)
	}
}

// The steps of each run are kept in step with the id index through
// appends, re-appends, truncations, deletes and imports.
func TestRunIndexFollowsSteps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := New()
	defer m.Close()
	for _, id := range []string{"a", "b"} {
		if _, err := m.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(id, session, run string) *steptype.Step {
		return &steptype.Step{ID: id, SessionID: session, RunID: run, Kind: steptype.KindTool, Status: steptype.StepCompleted}
	}
	appendSteps := func(steps ...*steptype.Step) {
		t.Helper()
		if _, err := m.StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		appendSteps(step(fmt.Sprint("a", i), "a", fmt.Sprint("r", i%2)), step(fmt.Sprint("b", i), "b", "r1"))
	}
	appendSteps(step("a0", "a", "r0")) // a re-append of a stored step
	checkRunIndex(t, m, "after appends")
	if _, err := m.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "a", StartSeq: 3}); err != nil {
		t.Fatal(err)
	}
	checkRunIndex(t, m, "after a truncation")
	list, err := m.StepList(ctx, &store.StepListParams{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if got := fmt.Sprint(ids); got != "[b0 a1 b1 b2 b3 b4 b5]" {
		t.Fatalf("steps of r1 after the truncation: %s", got)
	}
	sess, err := m.SessionGet(ctx, &store.SessionGetParams{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	saved, err := m.StepList(ctx, &store.StepListParams{SessionID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SessionDelete(ctx, &store.SessionDeleteParams{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	checkRunIndex(t, m, "after a delete")
	if err := m.SessionImport(ctx, &store.SessionImportParams{Session: sess}); err != nil {
		t.Fatal(err)
	}
	if err := m.StepImport(ctx, &store.StepImportParams{Steps: saved}); err != nil {
		t.Fatal(err)
	}
	checkRunIndex(t, m, "after an import")
}

// BenchmarkStepListByRun reads one run's steps from a store holding many
// other runs' steps: the cost follows the run, not the store.
func BenchmarkStepListByRun(b *testing.B) {
	ctx := b.Context()
	m := New()
	defer m.Close()
	for s := range 200 {
		sid := fmt.Sprint("s", s)
		if _, err := m.SessionCreate(ctx, &store.SessionCreateParams{ID: sid}); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			if _, err := m.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: fmt.Sprint(sid, "-", i), SessionID: sid, RunID: fmt.Sprint(sid, "-r", i/10),
				Kind: steptype.KindTool, Status: steptype.StepCompleted}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		if steps, err := m.StepList(ctx, &store.StepListParams{RunID: "s7-r3"}); err != nil || len(steps) != 10 {
			b.Fatal(len(steps), err)
		}
	}
}

// A read by run takes the shared lock (and its sessions' locks), so it
// does not wait for, nor stall, the per-session paths that hold the shared
// lock: here one is held throughout the read.
func TestStepListByRunShared(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := New()
	defer m.Close()
	if _, err := m.SessionCreate(ctx, &store.SessionCreateParams{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "x", SessionID: "a", RunID: "r", Kind: steptype.KindTool, Status: steptype.StepCompleted}}}); err != nil {
		t.Fatal(err)
	}
	m.mu.RLock() // another reader, e.g. an append of another session
	defer m.mu.RUnlock()
	done := make(chan error, 1)
	go func() {
		steps, err := m.StepList(ctx, &store.StepListParams{RunID: "r"})
		if err == nil && (len(steps) != 1 || steps[0].ID != "x") {
			err = fmt.Errorf("steps %v", steps)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read by run waited for the exclusive lock")
	}
}
