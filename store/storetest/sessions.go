package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)

func testSessions(t *testing.T, h *harness) {
	h.sub(t, "CreateGet", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		p := &store.SessionCreateParams{ID: "s1", Agent: "a", Title: "T", Metadata: json.RawMessage(`{"k":1}`), Now: t0}
		created, err := st.SessionCreate(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want := &steptype.Session{ID: "s1", Agent: "a", Title: "T", Metadata: json.RawMessage(`{"k":1}`), CreatedAt: t0, UpdatedAt: t0}
		sameJSON(t, "created", created, want)
		sameJSON(t, "got", getSession(t, st, "s1"), want)
		created.Title = "mutated"
		if g := getSession(t, st, "s1"); g.Title != "T" {
			t.Errorf("mutating a returned session changed the store: title %q", g.Title)
		}
	})
	h.sub(t, "CreateDefaultsNow", func(t *testing.T, st store.Store) {
		before := time.Now().Add(-time.Second)
		s := mustSession(t, st, "s1")
		if s.CreatedAt.Before(before) || !s.UpdatedAt.Equal(s.CreatedAt) {
			t.Errorf("CreatedAt %v UpdatedAt %v, want now", s.CreatedAt, s.UpdatedAt)
		}
	})
	h.sub(t, "CreateDuplicate", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		_, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1", Title: "other"})
		wantErr(t, "duplicate session", err, store.ErrConflict)
		if g := getSession(t, st, "s1"); g.Title != "" || g.Agent != "agent" {
			t.Errorf("duplicate create changed the session: %+v", g)
		}
	})
	h.sub(t, "CreateInvalid", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		_, err := st.SessionCreate(ctx, &store.SessionCreateParams{})
		wantErr(t, "empty id", err, store.ErrInvalid)
		_, err = st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1", Metadata: json.RawMessage(`{`)})
		wantErr(t, "bad metadata", err, store.ErrInvalid)
		page, err := st.SessionList(ctx, &store.SessionListParams{})
		if err != nil || len(page.Sessions) != 0 {
			t.Errorf("after invalid creates: %d sessions, %v", len(page.Sessions), err)
		}
	})
	h.sub(t, "ListFilters", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		for _, p := range []store.SessionCreateParams{
			{ID: "s-alpha", Agent: "support", Title: "Refund request"},
			{ID: "s-beta", Agent: "support", Title: "Password"},
			{ID: "s-gamma", Agent: "coder", Title: "Fix the build"},
		} {
			if _, err := st.SessionCreate(ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
		fill(t, st, "s-alpha", "a", 2)
		if _, err := st.SessionFork(ctx, &store.SessionForkParams{ID: "s-fork", ParentID: "s-alpha", Sequence: 1}); err != nil {
			t.Fatal(err)
		}
		ids := func(p store.SessionListParams) []string {
			t.Helper()
			page, err := st.SessionList(ctx, &p)
			if err != nil {
				t.Fatalf("SessionList(%+v): %v", p, err)
			}
			var out []string
			for _, s := range page.Sessions {
				out = append(out, s.ID)
			}
			slices.Sort(out)
			return out
		}
		for _, c := range []struct {
			p    store.SessionListParams
			want []string
		}{
			{store.SessionListParams{}, []string{"s-alpha", "s-beta", "s-fork", "s-gamma"}},
			{store.SessionListParams{Agent: "coder"}, []string{"s-gamma"}},
			{store.SessionListParams{Agent: "support"}, []string{"s-alpha", "s-beta", "s-fork"}},
			{store.SessionListParams{ParentID: "s-alpha"}, []string{"s-fork"}},
			{store.SessionListParams{Query: "REFUND"}, []string{"s-alpha"}},
			{store.SessionListParams{Query: "code"}, []string{"s-gamma"}},
			{store.SessionListParams{Query: "s-b"}, []string{"s-beta"}},
			{store.SessionListParams{Query: "%"}, nil},
			{store.SessionListParams{Agent: "support", Query: "pass"}, []string{"s-beta"}},
		} {
			if got := ids(c.p); !slices.Equal(got, c.want) {
				t.Errorf("SessionList(%+v) = %v, want %v", c.p, got, c.want)
			}
		}
	})
	h.sub(t, "ListMetadata", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		for _, p := range []store.SessionCreateParams{
			{ID: "m-str", Metadata: json.RawMessage(`{"user":"ada","n":1,"ok":true,"x":null,"obj":{"a":1}}`)},
			{ID: "m-num", Metadata: json.RawMessage(`{"user":"1","n":1.0,"ok":false}`)},
			{ID: "m-other", Metadata: json.RawMessage(`{"user":"bob","n":2}`)},
			{ID: "m-array", Metadata: json.RawMessage(`["user"]`)},
			{ID: "m-none"},
		} {
			if _, err := st.SessionCreate(ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
		ids := func(filter map[string]any) []string {
			t.Helper()
			page, err := st.SessionList(ctx, &store.SessionListParams{Metadata: filter})
			if err != nil {
				t.Fatalf("SessionList(metadata %v): %v", filter, err)
			}
			var out []string
			for _, s := range page.Sessions {
				out = append(out, s.ID)
			}
			slices.Sort(out)
			return out
		}
		for _, c := range []struct {
			filter map[string]any
			want   []string
		}{
			{map[string]any{"user": "ada"}, []string{"m-str"}},
			{map[string]any{"user": "1"}, []string{"m-num"}},
			{map[string]any{"n": 1}, []string{"m-num", "m-str"}},
			{map[string]any{"n": 1, "user": "ada"}, []string{"m-str"}},
			{map[string]any{"ok": true}, []string{"m-str"}},
			{map[string]any{"ok": false}, []string{"m-num"}},
			{map[string]any{"x": nil}, []string{"m-str"}},
			{map[string]any{"user": "nobody"}, nil},
			{map[string]any{"missing": "ada"}, nil},
			{map[string]any{"n": "1"}, nil},
			{map[string]any{}, []string{"m-array", "m-none", "m-num", "m-other", "m-str"}},
		} {
			if got := ids(c.filter); !slices.Equal(got, c.want) {
				t.Errorf("SessionList(metadata %v) = %v, want %v", c.filter, got, c.want)
			}
		}
		_, err := st.SessionList(ctx, &store.SessionListParams{Metadata: map[string]any{"obj": map[string]any{"a": 1}}})
		wantErr(t, "object in a metadata filter", err, store.ErrInvalid)
	})
	h.sub(t, "Update", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "u1", Title: "T", Metadata: json.RawMessage(`{"a":1,"b":2}`), Now: t0}); err != nil {
			t.Fatal(err)
		}
		later := t0.Add(time.Second)
		title := "renamed"
		u, err := st.SessionUpdate(ctx, &store.SessionUpdateParams{ID: "u1", Metadata: json.RawMessage(`{"b":null,"c":"x"}`), Title: &title, Now: later})
		if err != nil {
			t.Fatal(err)
		}
		got := getSession(t, st, "u1")
		sameJSON(t, "updated", u, got)
		var meta map[string]any
		if err := json.Unmarshal(got.Metadata, &meta); err != nil || len(meta) != 2 || meta["a"] != float64(1) || meta["c"] != "x" {
			t.Errorf("metadata after the merge %s (%v), want {a:1, c:x}", got.Metadata, err)
		}
		if got.Title != "renamed" || !got.UpdatedAt.Equal(later) || !got.CreatedAt.Equal(t0) {
			t.Errorf("title %q updated %v created %v", got.Title, got.UpdatedAt, got.CreatedAt)
		}
		if page, err := st.SessionList(ctx, &store.SessionListParams{Metadata: map[string]any{"c": "x"}}); err != nil || len(page.Sessions) != 1 {
			t.Errorf("list by the merged key: %v, %v", page, err)
		}
		_, err = st.SessionUpdate(ctx, &store.SessionUpdateParams{ID: "u1", Metadata: json.RawMessage(`[1]`)})
		wantErr(t, "non-object patch", err, store.ErrInvalid)
		_, err = st.SessionUpdate(ctx, &store.SessionUpdateParams{ID: "nope", Metadata: json.RawMessage(`{}`)})
		wantErr(t, "unknown session", err, store.ErrNotFound)
		_, err = st.SessionUpdate(ctx, &store.SessionUpdateParams{})
		wantErr(t, "no id", err, store.ErrInvalid)
		sameJSON(t, "after refused updates", getSession(t, st, "u1"), got)
	})
	h.sub(t, "ListPagination", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		const n = 23
		for i := range n {
			// Pairs of sessions share an UpdatedAt so ties are broken by id.
			now := t0.Add(time.Duration(i/2) * time.Millisecond)
			if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: fmt.Sprintf("s%02d", i), Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		var all []*steptype.Session
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("pagination does not end")
			}
			page, err := st.SessionList(ctx, &store.SessionListParams{Limit: 5, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Sessions) > 5 {
				t.Fatalf("page of %d > limit 5", len(page.Sessions))
			}
			all = append(all, page.Sessions...)
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		if len(all) != n {
			t.Fatalf("paged %d sessions, want %d", len(all), n)
		}
		for i := 1; i < len(all); i++ {
			a, b := all[i-1], all[i]
			if a.UpdatedAt.Before(b.UpdatedAt) || (a.UpdatedAt.Equal(b.UpdatedAt) && a.ID <= b.ID) {
				t.Errorf("order broken at %d: %s@%v before %s@%v", i, a.ID, a.UpdatedAt, b.ID, b.UpdatedAt)
			}
		}
		_, err := st.SessionList(ctx, &store.SessionListParams{Cursor: "not a cursor!"})
		wantErr(t, "bad cursor", err, store.ErrInvalid)
	})
	h.sub(t, "Totals", func(t *testing.T, st store.Store) {
		created := mustSession(t, st, "s1")
		steps := []*steptype.Step{newStep("s1", "x1"), newStep("s1", "x2"), newStep("s1", "x3")}
		for i, s := range steps {
			s.Metrics = steptype.Metrics{InputTokens: int64(10 * (i + 1)), OutputTokens: int64(i + 1), Cost: 0.25}
		}
		mustAppend(t, st, steps[0])
		if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: steps[1:]}); err != nil {
			t.Fatal(err)
		}
		s := getSession(t, st, "s1")
		if s.InputTokens != 60 || s.OutputTokens != 6 || s.Cost != 0.75 || s.LastSequence != 3 {
			t.Errorf("totals = in %d out %d cost %v last %d, want 60 6 0.75 3", s.InputTokens, s.OutputTokens, s.Cost, s.LastSequence)
		}
		if s.UpdatedAt.Before(created.UpdatedAt) {
			t.Errorf("UpdatedAt went back: %v < %v", s.UpdatedAt, created.UpdatedAt)
		}
	})
	h.sub(t, "Delete", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "keep")
		mustSession(t, st, "s1")
		fill(t, st, "keep", "k", 1)
		steps := fill(t, st, "s1", "x", 3)
		if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SessionFork(ctx, &store.SessionForkParams{ID: "f1", ParentID: "s1", Sequence: 2}); err != nil {
			t.Fatal(err)
		}
		err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s1"})
		wantErr(t, "delete with a fork", err, store.ErrConflict)
		if n, err := st.StepCount(ctx, &store.StepCountParams{SessionID: "s1"}); err != nil || n != 3 {
			t.Errorf("after refused delete: count %d, %v", n, err)
		}
		if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "f1"}); err != nil {
			t.Fatal(err)
		}
		if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s1"}); err != nil {
			t.Fatal(err)
		}
		_, err = st.SessionGet(ctx, &store.SessionGetParams{ID: "s1"})
		wantErr(t, "deleted session", err, store.ErrNotFound)
		_, err = st.StepGet(ctx, &store.StepGetParams{ID: steps[0].ID})
		wantErr(t, "step of deleted session", err, store.ErrNotFound)
		_, err = st.RunGet(ctx, &store.RunGetParams{ID: "r1"})
		wantErr(t, "run of deleted session", err, store.ErrNotFound)
		if n, err := st.StepCount(ctx, &store.StepCountParams{SessionID: "keep"}); err != nil || n != 1 {
			t.Errorf("other session: count %d, %v", n, err)
		}
		err = st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s1"})
		wantErr(t, "delete twice", err, store.ErrNotFound)
	})
}
