package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testTotalsEveryPath: the per-session totals and the per-minute metrics
// rollups equal what the bodies of the stored steps add up to, whichever
// path wrote or deleted the rows: single appends, concurrent appends of
// many sessions (group-committed where the driver does), multi-step
// appends, imports, a truncation and a session deletion. A driver whose
// triggers read per-row columns fails here when one insert path leaves
// them out (random shapes, seed logged).
func testTotalsEveryPath(t *testing.T, h *harness) {
	h.sub(t, "TotalsFollowEveryPath", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		var mu sync.Mutex // rng is shared by the concurrent appenders
		kinds := []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindError, steptype.KindCustom}
		roles := []steptype.Role{steptype.RoleNone, steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool}
		step := func(sid string, i int) *steptype.Step {
			mu.Lock()
			defer mu.Unlock()
			s := &steptype.Step{ID: fmt.Sprintf("%s-%d-%d", sid, i, rng.Uint32()), SessionID: sid,
				Kind: kinds[rng.IntN(len(kinds))], Role: roles[rng.IntN(len(roles))], Status: steptype.StepCompleted, Content: "x"}
			if rng.IntN(4) > 0 {
				s.Metrics = steptype.Metrics{InputTokens: rng.Int64N(5000), OutputTokens: rng.Int64N(500),
					CachedTokens: rng.Int64N(100), Cost: float64(rng.IntN(10000)) / 1e5}
			}
			if rng.IntN(8) == 0 {
				s.Status = steptype.StepFailed
			}
			return s
		}
		sessions := []string{"single", "batch", "imported", "gone"}
		for i := range 4 {
			sessions = append(sessions, fmt.Sprintf("conc%d", i))
		}
		for _, sid := range sessions {
			if sid != "imported" {
				mustSession(t, st, sid)
			}
		}
		for i := range 12 {
			mustAppend(t, st, step("single", i))
			mustAppend(t, st, step("gone", i))
		}
		var batch []*steptype.Step
		for i := range 9 {
			batch = append(batch, step("batch", i))
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*15)
		for c := range 4 {
			wg.Go(func() {
				sid := fmt.Sprintf("conc%d", c)
				for i := range 15 {
					if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(sid, i)}}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// An import, with steps as a copy carries them (sequence and time set).
		now := time.Now().UTC()
		if err := st.SessionImport(ctx, &store.SessionImportParams{Session: &steptype.Session{ID: "imported", Agent: "agent",
			LastSequence: 10, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
		var imported []*steptype.Step
		for i := 1; i <= 10; i++ {
			s := step("imported", i)
			s.Sequence, s.CreatedAt = int64(i), now.Add(time.Duration(i)*time.Millisecond)
			imported = append(imported, s)
		}
		if err := st.StepImport(ctx, &store.StepImportParams{Steps: imported}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "single", StartSeq: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "imported", StartSeq: 8}); err != nil {
			t.Fatal(err)
		}
		if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "gone"}); err != nil {
			t.Fatal(err)
		}
		var all []*steptype.Step
		for _, sid := range sessions {
			if sid == "gone" {
				continue
			}
			wantStats(t, st, st, sid)
			all = append(all, list(t, st, &store.StepListParams{SessionID: sid})...)
		}
		wantRollups(t, st, all)
	})
}

// wantRollups compares the metrics of the whole minutes around steps (read
// from the rollups) with the sums of the steps' own usage.
func wantRollups(t *testing.T, ms store.MetricsStore, steps []*steptype.Step) {
	t.Helper()
	var want store.MetricsPoint
	first := time.Now()
	for _, s := range steps {
		if s.CreatedAt.Before(first) {
			first = s.CreatedAt
		}
		want.Steps++
		if s.Kind == steptype.KindError || s.Status == steptype.StepFailed {
			want.Errors++
		}
		want.InputTokens += s.Metrics.InputTokens
		want.OutputTokens += s.Metrics.OutputTokens
		want.Cost += s.Metrics.Cost
	}
	from := first.Truncate(time.Minute)
	m := metricsQuery(t, ms, store.MetricsParams{From: from, To: time.Now().Truncate(time.Minute).Add(2 * time.Minute), Bucket: store.BucketDay})
	var got store.MetricsPoint
	for _, sr := range m.Series {
		for _, p := range sr.Points {
			got.Steps, got.Errors, got.InputTokens, got.OutputTokens = got.Steps+p.Steps, got.Errors+p.Errors, got.InputTokens+p.InputTokens, got.OutputTokens+p.OutputTokens
			got.Cost += p.Cost
		}
	}
	if got.Steps != want.Steps || got.Errors != want.Errors || got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens || math.Abs(got.Cost-want.Cost) > 1e-9 {
		t.Errorf("metrics over the steps' minutes: got steps %d errors %d in %d out %d cost %g; want %d %d %d %d %g",
			got.Steps, got.Errors, got.InputTokens, got.OutputTokens, got.Cost, want.Steps, want.Errors, want.InputTokens, want.OutputTokens, want.Cost)
	}
}
