package storetest

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testVectors checks store.VectorStore. Every driver must implement it
// (step memory and GET /v1/search use it): a driver that does not fails
// here.
func testVectors(t *testing.T, h *harness) {
	vsub := func(name string, fn func(t *testing.T, st store.Store, vs store.VectorStore)) {
		h.sub(t, name, func(t *testing.T, st store.Store) { fn(t, st, st) })
	}
	vsub("SearchOrder", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		hits := search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 10})
		wantHits(t, "all", hits, "a1:0.000 a2:0.293 b1:1.000 b2:1.707")
		wantHits(t, "k=2", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{3, 0}, K: 2}), "a1:0.000 a2:0.293")
		wantHits(t, "max distance", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 10, MaxDistance: 0.5}), "a1:0.000 a2:0.293")
		got, err := st.StepGet(t.Context(), &store.StepGetParams{ID: "a2"})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "hit step", hits[1].Step, got)
	})
	vsub("Filters", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		q := func(p store.VectorSearchParams) *store.VectorSearchParams {
			p.Embedder, p.Vector, p.K = "e2", []float32{1, 0}, 10
			return &p
		}
		wantHits(t, "agent", search(t, vs, q(store.VectorSearchParams{Agent: "beta"})), "b1:1.000 b2:1.707")
		wantHits(t, "agent without sessions", search(t, vs, q(store.VectorSearchParams{Agent: "nobody"})), "")
		wantHits(t, "sessions", search(t, vs, q(store.VectorSearchParams{SessionIDs: []string{"sb", "nope"}})), "b1:1.000 b2:1.707")
		wantHits(t, "agent and other session", search(t, vs, q(store.VectorSearchParams{Agent: "alpha", SessionIDs: []string{"sb"}})), "")
		wantHits(t, "kinds", search(t, vs, q(store.VectorSearchParams{Kinds: []steptype.Kind{steptype.KindTool}})), "a2:0.293 b2:1.707")
		wantHits(t, "exclude run", search(t, vs, q(store.VectorSearchParams{ExcludeRunIDs: []string{"ra"}})), "b1:1.000 b2:1.707")
		wantHits(t, "after", search(t, vs, q(store.VectorSearchParams{After: t0.Add(2 * time.Hour)})), "b1:1.000 b2:1.707")
		wantHits(t, "before", search(t, vs, q(store.VectorSearchParams{Before: t0.Add(2 * time.Hour)})), "a1:0.000 a2:0.293")
		wantHits(t, "range", search(t, vs, q(store.VectorSearchParams{After: t0.Add(time.Hour), Before: t0.Add(3 * time.Hour)})), "a2:0.293 b1:1.000")
	})
	vsub("EmbeddersNeverMix", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		// e3 has other vectors, of another dimension, for two of the steps.
		upsert(t, vs, "e3", map[string][]float32{"b2": {0, 0, 1}, "a1": {0, 1, 0}})
		wantHits(t, "e3", search(t, vs, &store.VectorSearchParams{Embedder: "e3", Vector: []float32{0, 0, 1}, K: 10}), "b2:0.000 a1:1.000")
		wantHits(t, "e2 unchanged", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1}), "a1:0.000")
		wantCounts(t, vs, "", "e2/2:4 e3/3:2")
		wantCounts(t, vs, "e3", "e3/3:2")
	})
	vsub("Replace", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1}) // load any index
		upsert(t, vs, "e2", map[string][]float32{"b2": {2, 0}})
		wantHits(t, "replaced", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 2}), "a1:0.000 b2:0.000")
		wantCounts(t, vs, "e2", "e2/2:4")
	})
	vsub("Ties", func(t *testing.T, st store.Store, vs store.VectorStore) {
		mustSession(t, st, "s")
		vecs := map[string][]float32{}
		for _, id := range []string{"t3", "t1", "t4", "t2"} {
			mustAppend(t, st, newStep("s", id))
			vecs[id] = []float32{1, 1}
		}
		upsert(t, vs, "e2", vecs)
		wantHits(t, "ties by id", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 1}, K: 3}), "t1:0.000 t2:0.000 t3:0.000")
	})
	vsub("DeletedSteps", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1}) // load any index
		if _, err := st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: "sa", StartSeq: 2}); err != nil {
			t.Fatal(err)
		}
		wantHits(t, "after truncate", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 10}), "a1:0.000 b1:1.000 b2:1.707")
		wantCounts(t, vs, "e2", "e2/2:3")
		// The same id appended again is a new step without a vector.
		mustAppend(t, st, newStep("sa", "a2"))
		wantHits(t, "re-appended", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 10}), "a1:0.000 b1:1.000 b2:1.707")
		if err := st.SessionDelete(t.Context(), &store.SessionDeleteParams{ID: "sb"}); err != nil {
			t.Fatal(err)
		}
		wantHits(t, "after session delete", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 10}), "a1:0.000")
		if _, err := st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: "sa", StartSeq: 1}); err != nil {
			t.Fatal(err)
		}
		_, err := vs.VectorSearch(t.Context(), &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1})
		wantErr(t, "search when every vector is gone", err, store.ErrNoVectors)
	})
	vsub("Missing", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		mustAppend(t, st, newStep("sa", "a3"), &steptype.Step{ID: "a4", SessionID: "sa", Kind: steptype.KindInput, Status: steptype.StepWaiting})
		wantIDs(t, "e2", missing(t, vs, &store.VectorMissingParams{Embedder: "e2"}), "a3")
		wantIDs(t, "unknown embedder", missing(t, vs, &store.VectorMissingParams{Embedder: "new"}), "a1 a2 a3 b1 b2")
		wantIDs(t, "page", missing(t, vs, &store.VectorMissingParams{Embedder: "new", AfterID: "a2", Limit: 2}), "a3 b1")
		wantIDs(t, "kinds", missing(t, vs, &store.VectorMissingParams{Embedder: "new", Kinds: []steptype.Kind{steptype.KindTool}}), "a2 b2")
	})
	vsub("BadInput", func(t *testing.T, st store.Store, vs store.VectorStore) {
		vecFixture(t, st, vs)
		ctx := t.Context()
		for _, c := range []struct {
			name string
			p    store.VectorUpsertParams
			want error
		}{
			{"no embedder", store.VectorUpsertParams{Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{1, 0}}}}, store.ErrInvalid},
			{"dimension", store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{1, 0, 0}}}}, store.ErrDimensionMismatch},
			{"mixed dimensions", store.VectorUpsertParams{Embedder: "e9", Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{1}}, {StepID: "a2", Vector: []float32{1, 0}}}}, store.ErrDimensionMismatch},
			{"zero vector", store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{0, 0}}}}, store.ErrInvalid},
			{"NaN", store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{float32(math.NaN()), 0}}}}, store.ErrInvalid},
			{"empty vector", store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: "a1"}}}, store.ErrInvalid},
			{"twice", store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{0, 1}}, {StepID: "a1", Vector: []float32{0, 1}}}}, store.ErrInvalid},
			{"missing step", store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: "a1", Vector: []float32{0, 1}}, {StepID: "ghost", Vector: []float32{0, 1}}}}, store.ErrNotFound},
		} {
			_, err := vs.VectorUpsert(ctx, &c.p)
			wantErr(t, "upsert "+c.name, err, c.want)
		}
		// Nothing of the failed calls was written.
		wantHits(t, "unchanged", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1}), "a1:0.000")
		wantCounts(t, vs, "", "e2/2:4")
		n, err := vs.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e2", SkipMissing: true,
			Vectors: []store.StepVector{{StepID: "ghost", Vector: []float32{0, 1}}, {StepID: "a1", Vector: []float32{0, 1}}}})
		if err != nil || n != 1 {
			t.Errorf("upsert with SkipMissing = %d, %v; want 1, nil", n, err)
		}
		for _, c := range []struct {
			name string
			p    store.VectorSearchParams
			want error
		}{
			{"k=0", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}}, store.ErrInvalid},
			{"k<0", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: -1}, store.ErrInvalid},
			{"k too big", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: store.MaxVectorK + 1}, store.ErrInvalid},
			{"negative distance", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1, MaxDistance: -1}, store.ErrInvalid},
			{"no embedder", store.VectorSearchParams{Vector: []float32{1, 0}, K: 1}, store.ErrInvalid},
			{"zero query", store.VectorSearchParams{Embedder: "e2", Vector: []float32{0, 0}, K: 1}, store.ErrInvalid},
			{"bad kind", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1, Kinds: []steptype.Kind{"nope"}}, store.ErrInvalid},
			{"empty range", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 1, After: t0, Before: t0}, store.ErrInvalid},
			{"dimension", store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0, 0}, K: 1}, store.ErrDimensionMismatch},
			{"unknown embedder", store.VectorSearchParams{Embedder: "never", Vector: []float32{1, 0}, K: 1}, store.ErrNoVectors},
		} {
			_, err := vs.VectorSearch(ctx, &c.p)
			wantErr(t, "search "+c.name, err, c.want)
		}
		_, err = vs.VectorMissing(ctx, &store.VectorMissingParams{})
		wantErr(t, "missing without embedder", err, store.ErrInvalid)
		_, err = vs.VectorMissing(ctx, &store.VectorMissingParams{Embedder: "e2", Limit: -1})
		wantErr(t, "missing with negative limit", err, store.ErrInvalid)
	})
	vsub("Concurrent", func(t *testing.T, st store.Store, vs store.VectorStore) {
		mustSession(t, st, "s")
		n := h.opts.Concurrency
		var wg sync.WaitGroup
		for g := range n {
			wg.Go(func() {
				id := fmt.Sprintf("c%03d", g)
				if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{newStep("s", id)}}); err != nil {
					t.Error(err)
					return
				}
				v := []float32{float32(g + 1), 1}
				if _, err := vs.VectorUpsert(t.Context(), &store.VectorUpsertParams{Embedder: "e2", Vectors: []store.StepVector{{StepID: id, Vector: v}}}); err != nil {
					t.Error(err)
					return
				}
				if _, err := vs.VectorSearch(t.Context(), &store.VectorSearchParams{Embedder: "e2", Vector: v, K: 3}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		hits := search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: store.MaxVectorK})
		if len(hits) != n || hits[0].Step.ID != fmt.Sprintf("c%03d", n-1) {
			t.Errorf("after %d concurrent upserts: %d hits, first %s", n, len(hits), hits[0].Step.ID)
		}
	})
	vsub("Reopen", func(t *testing.T, st store.Store, vs store.VectorStore) {
		if h.opts.Reopen == nil {
			t.Skip("Options.Reopen is nil: the driver keeps nothing across Close")
		}
		vecFixture(t, st, vs)
		st = h.opts.Reopen(t, st)
		vs = st
		wantHits(t, "after reopen", search(t, vs, &store.VectorSearchParams{Embedder: "e2", Vector: []float32{1, 0}, K: 2}), "a1:0.000 a2:0.293")
		wantCounts(t, vs, "", "e2/2:4")
	})
}

// vecFixture stores four steps in two sessions of two agents, committed an
// hour apart, with 2-dimensional vectors of embedder "e2":
//
//	a1 (sa, alpha, run ra, user, t0)      (1, 0)
//	a2 (sa, alpha, run ra, tool, t0+1h)   (1, 1)
//	b1 (sb, beta,  run rb, user, t0+2h)   (0, 1)
//	b2 (sb, beta,  run rb, tool, t0+3h)   (-1, -1)
func vecFixture(t *testing.T, st store.Store, vs store.VectorStore) {
	t.Helper()
	for _, s := range []struct{ id, agent string }{{"sa", "alpha"}, {"sb", "beta"}} {
		if _, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: s.id, Agent: s.agent}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(id, session, run string, kind steptype.Kind, hours int) *steptype.Step {
		s := newStep(session, id)
		s.RunID, s.Kind, s.CreatedAt = run, kind, t0.Add(time.Duration(hours)*time.Hour)
		return s
	}
	mustAppend(t, st, step("a1", "sa", "ra", steptype.KindUser, 0), step("a2", "sa", "ra", steptype.KindTool, 1),
		step("b1", "sb", "rb", steptype.KindUser, 2), step("b2", "sb", "rb", steptype.KindTool, 3))
	upsert(t, vs, "e2", map[string][]float32{"a1": {1, 0}, "a2": {1, 1}, "b1": {0, 1}, "b2": {-1, -1}})
}

func upsert(t *testing.T, vs store.VectorStore, embedder string, vecs map[string][]float32) {
	t.Helper()
	p := &store.VectorUpsertParams{Embedder: embedder}
	for id, v := range vecs {
		p.Vectors = append(p.Vectors, store.StepVector{StepID: id, Vector: v})
	}
	n, err := vs.VectorUpsert(t.Context(), p)
	if err != nil || n != len(vecs) {
		t.Fatalf("VectorUpsert(%s) = %d, %v; want %d", embedder, n, err, len(vecs))
	}
}

func search(t *testing.T, vs store.VectorStore, p *store.VectorSearchParams) []*store.VectorHit {
	t.Helper()
	hits, err := vs.VectorSearch(t.Context(), p)
	if err != nil {
		t.Fatalf("VectorSearch(%+v): %v", p, err)
	}
	return hits
}

func missing(t *testing.T, vs store.VectorStore, p *store.VectorMissingParams) []*steptype.Step {
	t.Helper()
	got, err := vs.VectorMissing(t.Context(), p)
	if err != nil {
		t.Fatalf("VectorMissing(%+v): %v", p, err)
	}
	return got
}

// wantHits compares hits written "id:distance" (3 decimals).
func wantHits(t *testing.T, what string, hits []*store.VectorHit, want string) {
	t.Helper()
	parts := make([]string, len(hits))
	for i, h := range hits {
		parts[i] = fmt.Sprintf("%s:%.3f", h.Step.ID, h.Distance)
	}
	if got := strings.Join(parts, " "); got != want {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func wantIDs(t *testing.T, what string, steps []*steptype.Step, want string) {
	t.Helper()
	ids := make([]string, len(steps))
	for i, s := range steps {
		ids[i] = s.ID
	}
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// wantCounts compares VectorCount written "embedder/dim:count".
func wantCounts(t *testing.T, vs store.VectorStore, embedder, want string) {
	t.Helper()
	totals, err := vs.VectorCount(t.Context(), &store.VectorCountParams{Embedder: embedder})
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(totals))
	for i, c := range totals {
		parts[i] = fmt.Sprintf("%s/%d:%d", c.Embedder, c.Dim, c.Count)
	}
	if got := strings.Join(parts, " "); got != want {
		t.Errorf("VectorCount(%q) = %s, want %s", embedder, got, want)
	}
}
