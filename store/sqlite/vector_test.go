package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// A read-only store (another process, in production) keeps its in-process
// index in step with the writer: new vectors, replaced vectors and deleted
// steps.
func TestVectorIndexFollowsWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v.db")
	w := open(t, sqlite.Config{Path: path})
	ctx := t.Context()
	if _, err := w.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	add := func(id string, v []float32) {
		t.Helper()
		if _, err := w.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: id, SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{{StepID: id, Vector: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	add("a", []float32{1, 0})
	r := open(t, sqlite.Config{Path: path, ReadOnly: true})
	top := func(st *sqlite.Store) string {
		t.Helper()
		hits, err := st.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{0, 1}, K: 10})
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, h := range hits {
			out += h.Step.ID
		}
		return out
	}
	if got := top(r); got != "a" {
		t.Fatalf("reader before: %q", got)
	}
	add("b", []float32{0, 1})
	if got := top(r); got != "ba" {
		t.Errorf("reader after an insert: %q, want ba", got)
	}
	if _, err := w.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{{StepID: "a", Vector: []float32{0, 2}}}}); err != nil {
		t.Fatal(err)
	}
	if got := top(r); got != "ab" {
		t.Errorf("reader after a replace: %q, want ab", got)
	}
	if _, err := w.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s", StartSeq: 2}); err != nil {
		t.Fatal(err)
	}
	if got := top(r); got != "a" {
		t.Errorf("reader after a truncate: %q, want a", got)
	}
	if got := top(w); got != "a" {
		t.Errorf("writer after a truncate: %q, want a", got)
	}
	if _, err := r.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{{StepID: "a", Vector: []float32{1, 1}}}}); err == nil {
		t.Error("upsert on a read-only store succeeded")
	}
}
