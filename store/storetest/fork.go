package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// jsonCompact is s without insignificant space (a driver may store JSON
// reformatted).
func jsonCompact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("metadata %q: %v", s, err)
	}
	return b.String()
}

func mustFork(t *testing.T, st store.Store, id, parent string, seq int64) *steptype.Session {
	t.Helper()
	f, err := st.SessionFork(t.Context(), &store.SessionForkParams{ID: id, ParentID: parent, Sequence: seq, Title: "fork " + id, Now: t0})
	if err != nil {
		t.Fatalf("SessionFork(%s of %s at %d): %v", id, parent, seq, err)
	}
	return f
}

// wantLineage checks a session's full view, every range read of it, and
// StepGet, StepLast and StepCount.
func wantLineage(t *testing.T, st store.Store, sessionID, want string) {
	t.Helper()
	ctx := t.Context()
	all := list(t, st, &store.StepListParams{SessionID: sessionID})
	wantView(t, "lineage of "+sessionID, all, want)
	n, err := st.StepCount(ctx, &store.StepCountParams{SessionID: sessionID})
	if err != nil || n != int64(len(all)) {
		t.Errorf("StepCount(%s) = %d, %v, want %d", sessionID, n, err, len(all))
	}
	if last := getSession(t, st, sessionID).LastSequence; last != int64(len(all)) {
		t.Errorf("LastSequence(%s) = %d, want %d", sessionID, last, len(all))
	}
	if len(all) > 0 {
		last, err := st.StepLast(ctx, &store.StepLastParams{SessionID: sessionID})
		if err != nil || last.ID != all[len(all)-1].ID {
			t.Errorf("StepLast(%s) = %v, %v", sessionID, last, err)
		}
	}
	for i, s := range all {
		got, err := st.StepGet(ctx, &store.StepGetParams{SessionID: sessionID, Sequence: int64(i + 1)})
		if err != nil || got.ID != s.ID || got.Sequence != int64(i+1) {
			t.Errorf("StepGet(%s, %d) = %v, %v, want %s", sessionID, i+1, got, err, s.ID)
		}
	}
	// Every window, both directions, against the full view.
	for a := 1; a <= len(all); a++ {
		for b := a; b <= len(all); b++ {
			wantView(t, "range", list(t, st, &store.StepListParams{SessionID: sessionID, StartSeq: int64(a), EndSeq: int64(b)}), view(all[a-1:b]))
		}
		desc := list(t, st, &store.StepListParams{SessionID: sessionID, StartSeq: int64(a), Desc: true, Limit: 2})
		rev := []*steptype.Step{all[len(all)-1]}
		if len(all)-a >= 1 {
			rev = append(rev, all[len(all)-2])
		}
		wantView(t, "desc window", desc, view(rev))
	}
}

func testFork(t *testing.T, h *harness) {
	h.sub(t, "ReadsThroughLineage", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 5)
		f := mustFork(t, st, "f", "p", 3)
		if f.ParentSessionID != "p" || f.ForkSequence != 3 || f.LastSequence != 3 || f.Agent != "agent" || f.Title != "fork f" {
			t.Errorf("fork = %+v", f)
		}
		if f.InputTokens != 0 || f.Cost != 0 {
			t.Errorf("fork starts with totals %d/%v, want zero (own steps only)", f.InputTokens, f.Cost)
		}
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2 p/3/p-3")
		fill(t, st, "f", "f", 2)
		fill(t, st, "p", "q", 1)
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2 p/3/p-3 f/4/f-1 f/5/f-2")
		wantLineage(t, st, "p", "p/1/p-1 p/2/p-2 p/3/p-3 p/4/p-4 p/5/p-5 p/6/q-1")
		wantView(t, "fork kinds filter", list(t, st, &store.StepListParams{SessionID: "f", Kinds: []steptype.Kind{steptype.KindUser}, StartSeq: 3, Limit: 2}), "p/3/p-3 f/4/f-1")
	})
	h.sub(t, "InheritsMetadata", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "p", Agent: "agent", Metadata: []byte(`{"tier":"gold"}`), Now: t0}); err != nil {
			t.Fatal(err)
		}
		fill(t, st, "p", "p", 2)
		for _, c := range []struct {
			id   string
			meta string
			want string
		}{{"inherit", "", `{"tier":"gold"}`}, {"own", `{"tier":"free"}`, `{"tier":"free"}`}} {
			p := &store.SessionForkParams{ID: c.id, ParentID: "p", Sequence: 1, Now: t0}
			if c.meta != "" {
				p.Metadata = []byte(c.meta)
			}
			f, err := st.SessionFork(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*steptype.Session{f, getSession(t, st, c.id)} {
				if got := string(s.Metadata); jsonCompact(t, got) != c.want {
					t.Errorf("fork %s metadata %s, want %s", c.id, got, c.want)
				}
			}
		}
		if _, err := st.SessionFork(ctx, &store.SessionForkParams{ID: "bad", ParentID: "p", Sequence: 1, Metadata: []byte(`{`)}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("fork with malformed metadata: %v, want ErrInvalid", err)
		}
	})
	h.sub(t, "ForkOfFork", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 4)
		mustFork(t, st, "f", "p", 3)
		fill(t, st, "f", "f", 2)     // f: p1 p2 p3 f4 f5
		mustFork(t, st, "g", "f", 2) // g: p1 p2
		mustFork(t, st, "h", "f", 4) // h: p1 p2 p3 f4
		mustFork(t, st, "i", "h", 4) // i: p1 p2 p3 f4
		fill(t, st, "g", "g", 2)
		fill(t, st, "h", "h", 1)
		fill(t, st, "i", "i", 1)
		wantLineage(t, st, "g", "p/1/p-1 p/2/p-2 g/3/g-1 g/4/g-2")
		wantLineage(t, st, "h", "p/1/p-1 p/2/p-2 p/3/p-3 f/4/f-1 h/5/h-1")
		wantLineage(t, st, "i", "p/1/p-1 p/2/p-2 p/3/p-3 f/4/f-1 i/5/i-1")
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2 p/3/p-3 f/4/f-1 f/5/f-2")
		wantLineage(t, st, "p", "p/1/p-1 p/2/p-2 p/3/p-3 p/4/p-4")
	})
	h.sub(t, "ForkOfEmptyTail", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 2)
		mustFork(t, st, "f", "p", 2)
		mustFork(t, st, "g", "f", 2) // inside f's inherited part
		fill(t, st, "g", "g", 1)
		wantLineage(t, st, "g", "p/1/p-1 p/2/p-2 g/3/g-1")
		wantLineage(t, st, "f", "p/1/p-1 p/2/p-2")
	})
	h.sub(t, "Invalid", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 3)
		mustSession(t, st, "taken")
		for name, c := range map[string]struct {
			p    store.SessionForkParams
			want error
		}{
			"at zero":        {store.SessionForkParams{ID: "f", ParentID: "p", Sequence: 0}, store.ErrInvalid},
			"negative":       {store.SessionForkParams{ID: "f", ParentID: "p", Sequence: -1}, store.ErrInvalid},
			"beyond end":     {store.SessionForkParams{ID: "f", ParentID: "p", Sequence: 4}, store.ErrInvalid},
			"unknown parent": {store.SessionForkParams{ID: "f", ParentID: "nope", Sequence: 1}, store.ErrNotFound},
			"no id":          {store.SessionForkParams{ParentID: "p", Sequence: 1}, store.ErrInvalid},
			"no parent":      {store.SessionForkParams{ID: "f", Sequence: 1}, store.ErrInvalid},
			"id taken":       {store.SessionForkParams{ID: "taken", ParentID: "p", Sequence: 1}, store.ErrConflict},
		} {
			_, err := st.SessionFork(ctx, &c.p)
			wantErr(t, name, err, c.want)
		}
		_, err := st.SessionGet(ctx, &store.SessionGetParams{ID: "f"})
		wantErr(t, "no fork created", err, store.ErrNotFound)
		empty := mustSession(t, st, "empty")
		_, err = st.SessionFork(ctx, &store.SessionForkParams{ID: "f", ParentID: empty.ID, Sequence: 1})
		wantErr(t, "fork of an empty session", err, store.ErrInvalid)
	})
}
