package storetest

import (
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

func truncate(st store.Store, t *testing.T, sessionID string, from int64) (int64, error) {
	return st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: sessionID, StartSeq: from})
}

func testTruncate(t *testing.T, h *harness) {
	h.sub(t, "Deletes", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		var steps []*steptype.Step
		for i := range 5 {
			s := newStep("s1", "x"+string(rune('1'+i)))
			s.Metrics = steptype.Metrics{InputTokens: 10, OutputTokens: 1, Cost: 0.5}
			steps = append(steps, s)
		}
		mustAppend(t, st, steps...)
		n, err := truncate(st, t, "s1", 3)
		if err != nil || n != 3 {
			t.Fatalf("truncate from 3 = %d, %v, want 3", n, err)
		}
		s := getSession(t, st, "s1")
		if s.LastSequence != 2 || s.InputTokens != 20 || s.OutputTokens != 2 || s.Cost != 1 {
			t.Errorf("after truncate: last %d totals %d/%d/%v, want 2 20/2/1", s.LastSequence, s.InputTokens, s.OutputTokens, s.Cost)
		}
		_, err = st.StepGet(ctx, &store.StepGetParams{ID: "x3"})
		wantErr(t, "truncated step", err, store.ErrNotFound)
		mustAppend(t, st, newStep("s1", "y3"), newStep("s1", "x3"))
		wantView(t, "appended after truncate", list(t, st, &store.StepListParams{SessionID: "s1"}), "s1/1/x1 s1/2/x2 s1/3/y3 s1/4/x3")
	})
	h.sub(t, "BeyondEnd", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		fill(t, st, "s1", "x", 2)
		if n, err := truncate(st, t, "s1", 3); err != nil || n != 0 {
			t.Errorf("truncate past the end = %d, %v", n, err)
		}
		if n, err := truncate(st, t, "s1", 1); err != nil || n != 2 {
			t.Errorf("truncate everything = %d, %v", n, err)
		}
		wantLineage(t, st, "s1", "")
	})
	h.sub(t, "RefusedWhileForked", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 5)
		mustFork(t, st, "f", "p", 3)
		for _, from := range []int64{1, 2, 3} {
			_, err := truncate(st, t, "p", from)
			wantErr(t, "truncate under a fork", err, store.ErrConflict)
		}
		wantLineage(t, st, "p", "p/1/p-1 p/2/p-2 p/3/p-3 p/4/p-4 p/5/p-5")
		if n, err := truncate(st, t, "p", 4); err != nil || n != 2 {
			t.Errorf("truncate above the fork = %d, %v", n, err)
		}
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2 p/3/p-3")
	})
	h.sub(t, "Fork", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 3)
		mustFork(t, st, "f", "p", 2)
		fill(t, st, "f", "f", 3) // f: p1 p2 f3 f4 f5
		for _, from := range []int64{0, 1, 2} {
			_, err := truncate(st, t, "f", from)
			wantErr(t, "truncate into the inherited part", err, store.ErrInvalid)
		}
		if n, err := truncate(st, t, "f", 4); err != nil || n != 2 {
			t.Errorf("truncate own part = %d, %v", n, err)
		}
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2 f/3/f-1")
		wantLineage(t, st, "p", "p/1/p-1 p/2/p-2 p/3/p-3")
		if n, err := truncate(st, t, "f", 3); err != nil || n != 1 {
			t.Errorf("truncate all own steps = %d, %v", n, err)
		}
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2")
	})
	h.sub(t, "Errors", func(t *testing.T, st store.Store) {
		_, err := truncate(st, t, "nope", 1)
		wantErr(t, "unknown session", err, store.ErrNotFound)
		_, err = truncate(st, t, "", 1)
		wantErr(t, "no session", err, store.ErrInvalid)
	})
}
