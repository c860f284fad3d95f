package storetest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testSessionStats: a store.SessionStatsReader's totals equal what the
// session's own steps and runs add up to, after appends, run status
// changes, a truncation and a fork (random shapes, seed logged).
func testSessionStats(t *testing.T, h *harness) {
	h.sub(t, "TotalsFollowWrites", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		kinds := []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindError, steptype.KindCustom}
		roles := []steptype.Role{steptype.RoleNone, steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool}
		mustSession(t, st, "p")
		mustSession(t, st, "other")
		statuses := []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunCompleted, steptype.RunFailed}
		for i := range 6 {
			r := &steptype.Run{ID: fmt.Sprintf("r%d", i), SessionID: "p", Agent: "agent", Status: statuses[rng.IntN(2)]}
			if i > 0 { // sub-agent runs: one unfinished top-level run at a time
				r.Hop, r.ParentRunID = 1, "r0"
			}
			mustRun(t, st, r)
		}
		mustRun(t, st, &steptype.Run{ID: "o", SessionID: "other", Agent: "agent"})
		for i := 5; i >= 0; i-- { // children first; every run ends (a truncation waits for that)
			s := statuses[2+rng.IntN(2)]
			if _, err := st.RunUpdate(ctx, &store.RunUpdateParams{ID: fmt.Sprintf("r%d", i), Status: &s}); err != nil {
				t.Fatal(err)
			}
		}
		add := func(sid string, n int) {
			for i := range n {
				s := &steptype.Step{ID: fmt.Sprintf("%s-%d-%d", sid, i, rng.Uint32()), SessionID: sid, Kind: kinds[rng.IntN(len(kinds))], Role: roles[rng.IntN(len(roles))],
					Status: steptype.StepCompleted, Content: "x",
					Metrics: steptype.Metrics{InputTokens: rng.Int64N(1000), OutputTokens: rng.Int64N(100), CachedTokens: rng.Int64N(50), Cost: float64(rng.IntN(1000)) / 1e4}}
				mustAppend(t, st, s)
			}
		}
		add("p", 30)
		add("other", 3)
		if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "p", StartSeq: int64(20 + rng.IntN(10))}); err != nil {
			t.Fatal(err)
		}
		mustFork(t, st, "f", "p", 10)
		add("f", 5)
		for _, sid := range []string{"p", "f", "other"} {
			wantStats(t, st, st, sid)
		}
		if _, err := st.SessionStats(ctx, &store.SessionStatsParams{ID: "nope"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionStats(unknown) = %v, want ErrNotFound", err)
		}
		if _, err := st.SessionStats(ctx, &store.SessionStatsParams{}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SessionStats(no id) = %v, want ErrInvalid", err)
		}
	})
}

// testSessionStatsFolds: the totals stay exact where a store keeps part of
// them folded and adds the rest when read (PostgreSQL folds a session's
// steps 256 at a time, migration 00100): across many multi-step appends,
// truncations below what was folded and appends reusing the sequences, a
// fork's imported copies written below its own later steps, concurrent
// appends, and a session deleted and created again under its id.
func testSessionStatsFolds(t *testing.T, h *harness) {
	h.sub(t, "TotalsAcrossFolds", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		kinds := []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindError}
		roles := []steptype.Role{steptype.RoleNone, steptype.RoleUser, steptype.RoleAssistant}
		n := 0
		step := func(sid string) *steptype.Step {
			n++
			return &steptype.Step{ID: fmt.Sprintf("%s-%d", sid, n), SessionID: sid, Kind: kinds[rng.IntN(len(kinds))], Role: roles[rng.IntN(len(roles))],
				Status: steptype.StepCompleted, Content: "x",
				Metrics: steptype.Metrics{InputTokens: rng.Int64N(1000), OutputTokens: rng.Int64N(100), CachedTokens: rng.Int64N(50), Cost: float64(rng.IntN(1000)) / 1e4}}
		}
		add := func(sid string, total int) {
			for total > 0 {
				k := min(total, 1+rng.IntN(40))
				batch := make([]*steptype.Step, k)
				for i := range batch {
					batch[i] = step(sid)
				}
				if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch}); err != nil {
					t.Fatal(err)
				}
				total -= k
			}
		}
		truncate := func(sid string, from int64) {
			if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: sid, StartSeq: from}); err != nil {
				t.Fatal(err)
			}
		}
		mustSession(t, st, "p")
		add("p", 255)
		wantStats(t, st, st, "p")
		add("p", 1)
		wantStats(t, st, st, "p")
		add("p", 600)
		wantStats(t, st, st, "p")
		truncate("p", 500) // below the folded steps
		wantStats(t, st, st, "p")
		add("p", 300) // the cut sequences written again
		wantStats(t, st, st, "p")
		truncate("p", 790) // within the last fold's steps, or above them
		add("p", 3)
		wantStats(t, st, st, "p")
		truncate("p", 2)
		wantStats(t, st, st, "p")
		add("p", 270)
		wantStats(t, st, st, "p")

		// A fork with its own steps folded, then the copies of the steps
		// it inherits imported below them, then detached.
		mustFork(t, st, "f", "p", 60)
		add("f", 300)
		wantStats(t, st, st, "f")
		var copies []*steptype.Step
		for _, s := range list(t, st, &store.StepListParams{SessionID: "p", EndSeq: 60}) {
			c := *s
			c.ID, c.SessionID = "copy-"+s.ID, "f"
			copies = append(copies, &c)
		}
		for len(copies) > 0 {
			k := min(len(copies), 1+rng.IntN(25))
			if err := st.StepImport(ctx, &store.StepImportParams{Steps: copies[:k]}); err != nil {
				t.Fatal(err)
			}
			copies = copies[k:]
		}
		// (Before the detach, a list shows the inherited steps, not the
		// copies the totals count.)
		if err := st.SessionDetach(ctx, &store.SessionDetachParams{ID: "f"}); err != nil {
			t.Fatal(err)
		}
		add("f", 200)
		wantStats(t, st, st, "f")
		wantStats(t, st, st, "p")

		// Concurrent appends, two writers per session.
		for _, sid := range []string{"c1", "c2", "c3"} {
			mustSession(t, st, sid)
		}
		var wg sync.WaitGroup
		for w := range 6 {
			sid := fmt.Sprintf("c%d", 1+w%3)
			batches := make([][]*steptype.Step, 30)
			for i := range batches {
				batches[i] = make([]*steptype.Step, 1+rng.IntN(12))
				for j := range batches[i] {
					batches[i][j] = step(sid)
				}
			}
			wg.Go(func() {
				for _, b := range batches {
					if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: b}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, sid := range []string{"c1", "c2", "c3"} {
			wantStats(t, st, st, sid)
		}

		// Deleted and created again: nothing of the first session's totals.
		if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SessionStats(ctx, &store.SessionStatsParams{ID: "c1"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionStats(deleted) = %v, want ErrNotFound", err)
		}
		mustSession(t, st, "c1")
		wantStats(t, st, st, "c1")
		add("c1", 300)
		wantStats(t, st, st, "c1")
	})
}

// wantStats compares SessionStats with the sums of the session's own steps
// and its runs as listed.
func wantStats(t *testing.T, st store.Store, sr store.SessionStatsReader, sid string) {
	t.Helper()
	ctx := t.Context()
	got, err := sr.SessionStats(ctx, &store.SessionStatsParams{ID: sid})
	if err != nil {
		t.Fatal(err)
	}
	steps := list(t, st, &store.StepListParams{SessionID: sid})
	type key struct {
		k steptype.Kind
		r steptype.Role
	}
	want := map[key]store.StepStat{}
	for _, s := range steps {
		if s.SessionID != sid {
			continue // inherited
		}
		w := want[key{s.Kind, s.Role}]
		w.Kind, w.Role = s.Kind, s.Role
		w.Steps++
		w.InputTokens += s.Metrics.InputTokens
		w.OutputTokens += s.Metrics.OutputTokens
		w.CachedTokens += s.Metrics.CachedTokens
		w.Cost += s.Metrics.Cost
		want[key{s.Kind, s.Role}] = w
	}
	if len(got.Steps) != len(want) {
		t.Errorf("%s: %d step stats %+v, want %d %+v", sid, len(got.Steps), got.Steps, len(want), want)
	}
	for _, g := range got.Steps {
		w, ok := want[key{g.Kind, g.Role}]
		if !ok || g.Steps != w.Steps || g.InputTokens != w.InputTokens || g.OutputTokens != w.OutputTokens || g.CachedTokens != w.CachedTokens || math.Abs(g.Cost-w.Cost) > 1e-9 {
			t.Errorf("%s %s/%s: got %+v, want %+v", sid, g.Kind, g.Role, g, w)
		}
	}
	runs, err := st.RunList(ctx, &store.RunListParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := map[steptype.RunStatus]int{}
	for _, r := range runs {
		wantRuns[r.Status]++
	}
	if fmt.Sprint(got.Runs) != fmt.Sprint(wantRuns) {
		t.Errorf("%s runs: got %v, want %v", sid, got.Runs, wantRuns)
	}
}
