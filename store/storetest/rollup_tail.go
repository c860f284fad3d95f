package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// RollupTail appends n steps of random kinds, roles and usage to a fresh
// session of st (in appends of a few steps, with a truncation midway) and
// checks after every 97 steps that the reads built on the rollups — the
// session's statistics and the per-minute metrics — equal a recomputation
// from the steps the store lists: a driver that folds its rollups in
// batches (SQLite, migration 00200) must add what it has not folded yet.
// The metrics are of the whole store: earlier names the sessions written
// before, which the recomputation adds.
func RollupTail(t *testing.T, st store.Store, session string, n int, earlier ...string) {
	t.Helper()
	ctx := t.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: session, Agent: "agent"}); err != nil {
		t.Fatal(err)
	}
	run := &steptype.Run{ID: session + "-run", SessionID: session, Agent: "agent", Status: steptype.RunCompleted} // a truncation needs no unfinished run
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: run}); err != nil {
		t.Fatal(err)
	}
	kinds := []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindError}
	roles := []steptype.Role{steptype.RoleNone, steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool}
	from := time.Now().Add(-time.Hour)
	written, truncated := 0, false
	for written < n {
		var batch []*steptype.Step
		for k := range 1 + written%5 {
			i := written + k
			batch = append(batch, &steptype.Step{ID: fmt.Sprintf("%s-%d", session, i), SessionID: session, RunID: run.ID,
				Kind: kinds[i%4], Status: steptype.StepCompleted, Role: roles[(i/3)%4],
				Metrics: steptype.Metrics{InputTokens: int64(i % 17), OutputTokens: int64(i % 5), CachedTokens: int64(i % 3),
					Cost: float64(i%8) / 4}})
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch}); err != nil {
			t.Fatal(err)
		}
		before := written
		written += len(batch)
		if !truncated && written > n/2 {
			// A truncation takes folded and unfolded steps alike.
			if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: session, StartSeq: int64(written - 300)}); err != nil {
				t.Fatal(err)
			}
			truncated = true
		}
		if written/97 != before/97 || written >= n {
			checkRollups(t, st, from, append([]string{session}, earlier...))
		}
	}
}

// checkRollups checks the statistics of sessions[0] and the metrics
// of all sessions (every session of st) since from.
func checkRollups(t *testing.T, st store.Store, from time.Time, sessions []string) {
	t.Helper()
	ctx := t.Context()
	session := sessions[0]
	var page []*steptype.Step
	for _, id := range sessions {
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		page = append(page, steps...)
	}
	type key struct {
		kind steptype.Kind
		role steptype.Role
	}
	want := map[key]store.StepStat{}
	var steps, errs, in, out int64
	var cost float64
	for _, s := range page {
		if s.SessionID != session {
			steps++
			if s.Kind == steptype.KindError || s.Status == steptype.StepFailed {
				errs++
			}
			in, out, cost = in+s.Metrics.InputTokens, out+s.Metrics.OutputTokens, cost+s.Metrics.Cost
			continue
		}
		k := key{s.Kind, s.Role}
		w := want[k]
		w.Kind, w.Role = s.Kind, s.Role
		w.Steps++
		w.InputTokens += s.Metrics.InputTokens
		w.OutputTokens += s.Metrics.OutputTokens
		w.CachedTokens += s.Metrics.CachedTokens
		w.Cost += s.Metrics.Cost
		want[k] = w
		steps++
		if s.Kind == steptype.KindError || s.Status == steptype.StepFailed {
			errs++
		}
		in += s.Metrics.InputTokens
		out += s.Metrics.OutputTokens
		cost += s.Metrics.Cost
	}
	if r, ok := st.(store.SessionStatsReader); ok {
		got, err := r.SessionStats(ctx, &store.SessionStatsParams{ID: session})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Steps) != len(want) {
			t.Fatalf("at %d steps in all: %d stat rows, want %d: %+v", steps, len(got.Steps), len(want), got.Steps)
		}
		for _, g := range got.Steps {
			if w := want[key{g.Kind, g.Role}]; g != w {
				t.Fatalf("at %d steps in all: stats %+v, recomputed %+v", steps, g, w)
			}
		}
	}
	if m, ok := st.(store.MetricsStore); ok {
		// Minute buckets from a time off the minute, so that the edges are
		// read from the steps and the middle from the rollups.
		p := store.MetricsParams{From: from.Add(7 * time.Second), To: time.Now().Add(time.Hour), Bucket: store.BucketMinute}
		if err := p.Normalize(); err != nil {
			t.Fatal(err)
		}
		res, err := m.Metrics(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		var gs, ge, gi, gout int64
		var gc float64
		for _, s := range res.Series {
			for _, pt := range s.Points {
				gs, ge, gi, gout, gc = gs+pt.Steps, ge+pt.Errors, gi+pt.InputTokens, gout+pt.OutputTokens, gc+pt.Cost
			}
		}
		if gs != steps || ge != errs || gi != in || gout != out || gc != cost {
			t.Fatalf("metrics: steps %d errors %d tokens %d/%d cost %v; recomputed %d %d %d/%d %v",
				gs, ge, gi, gout, gc, steps, errs, in, out, cost)
		}
	}
}
