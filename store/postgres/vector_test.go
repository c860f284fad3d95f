package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// Two instances on one schema (two `stepwise serve` behind a load
// balancer): the searching instance's in-process index follows what the
// other writes — new vectors, replaced vectors, deleted steps — reading
// only the rows that changed, never the whole table again.
func TestVectorIndexFollowsOtherInstance(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	w := open(t, postgres.Config{Schema: schema})
	r := open(t, postgres.Config{Schema: schema})
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
	top := func(st *postgres.Store) string {
		t.Helper()
		hits, err := st.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{0, 1}, K: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, h := range hits {
			out += h.Step.ID
		}
		return out
	}
	loaded := func(want int64) {
		t.Helper()
		if got := r.VectorRowsLoaded("e"); got != want {
			t.Errorf("reader loaded %d vector rows in all, want %d", got, want)
		}
	}
	for i := range 50 {
		add(fmt.Sprintf("x%02d", i), []float32{1, -1})
	}
	add("a", []float32{1, 0})
	if got := top(r); len(got) != 1+50*3 || got[:1] != "a" {
		t.Fatalf("reader before: %q", got)
	}
	loaded(51)
	top(r)
	loaded(51) // nothing new: no row read
	add("b", []float32{0, 1})
	if got := top(r); got[:2] != "ba" {
		t.Errorf("reader after an insert: %q, want ba…", got[:2])
	}
	loaded(52) // only the new row
	if _, err := w.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{{StepID: "a", Vector: []float32{0, 2}}}}); err != nil {
		t.Fatal(err)
	}
	if got := top(r); got[:2] != "ab" {
		t.Errorf("reader after a replace: %q, want ab…", got[:2])
	}
	loaded(53)
	// Truncate everything after a (sequence 51): b and the x's before it stay.
	if _, err := w.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s", StartSeq: 52}); err != nil {
		t.Fatal(err)
	}
	if got := top(r); len(got) != 1+50*3 || got[:1] != "a" {
		t.Errorf("reader after a truncate: %q, want a and the x's", got)
	}
	if got := top(w); len(got) != 1+50*3 {
		t.Errorf("writer after a truncate: %q", got)
	}
	if err := w.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{0, 1}, K: 1}); !errors.Is(err, store.ErrNoVectors) {
		t.Errorf("reader after the session was deleted: %v, want ErrNoVectors", err)
	}
	loaded(53)
}

// A vector of the wrong dimension for its embedder is refused with a
// clear error, from any instance, and writes nothing.
func TestVectorDimensionAcrossInstances(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	a := open(t, postgres.Config{Schema: schema})
	b := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	if _, err := a.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{
		{ID: "1", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted},
		{ID: "2", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e3", Vectors: []store.StepVector{{StepID: "1", Vector: []float32{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	_, err := b.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e3", Vectors: []store.StepVector{{StepID: "2", Vector: []float32{1, 2}}}})
	if !errors.Is(err, store.ErrDimensionMismatch) || err.Error() != `stepwise: vector dimension mismatch: embedder "e3" stores 3-dimensional vectors, got 2 dimensions `+
		`(a different model or configuration must use a different embedder name)` {
		t.Errorf("wrong dimension: %v", err)
	}
	if _, err := b.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e3", Vector: []float32{1, 2}, K: 1}); !errors.Is(err, store.ErrDimensionMismatch) {
		t.Errorf("search with the wrong dimension: %v", err)
	}
	if got, err := b.VectorCount(ctx, &store.VectorCountParams{Embedder: "e3"}); err != nil || len(got) != 1 || got[0].Count != 1 || got[0].Dim != 3 {
		t.Errorf("count after the refused upsert: %+v %v", got, err)
	}
}

// Writers on two instances upsert concurrently while a third instance
// searches in a loop: transactions commit in any order, yet the searcher's
// incremental refresh never skips a vector (a watermark taken from a
// sequence would: a row committed late below the mark is never read).
func TestVectorIndexMissesNoConcurrentWrite(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	writers := []*postgres.Store{open(t, postgres.Config{Schema: schema}), open(t, postgres.Config{Schema: schema})}
	r := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	const goroutines, each = 8, 25
	if _, err := writers[0].SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	var steps []*steptype.Step
	for g := range goroutines {
		for i := range each {
			steps = append(steps, &steptype.Step{ID: fmt.Sprintf("g%d-%02d", g, i), SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted})
		}
	}
	if _, err := writers[0].StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	// The embedder exists before the race, so searches start at once.
	if _, err := writers[0].VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{{StepID: "g0-00", Vector: []float32{1, 0}}}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	searched := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				searched <- n
				return
			default:
			}
			if _, err := r.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{1, 1}, K: 5}); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				w := writers[(g+i)%2]
				v := []float32{float32(g + 1), float32(i + 1)}
				if _, err := w.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e", Vectors: []store.StepVector{{StepID: fmt.Sprintf("g%d-%02d", g, i), Vector: v}}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	t.Logf("%d searches during the writes", <-searched)
	hits, err := r.VectorSearch(ctx, &store.VectorSearchParams{Embedder: "e", Vector: []float32{1, 1}, K: store.MaxVectorK})
	if err != nil || len(hits) != goroutines*each {
		t.Errorf("searcher holds %d vectors (%v), want %d", len(hits), err, goroutines*each)
	}
}

// The schema holds every vector to its embedder's dimension even when a
// row is written around the store (a hand-written INSERT, a foreign tool).
func TestVectorDimensionEnforcedBySchema(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{
		{ID: "1", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted},
		{ID: "2", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: "e3", Vectors: []store.StepVector{{StepID: "1", Vector: []float32{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	if _, err := conn.Exec(ctx, `SET search_path TO `+schema); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"dim of another embedder": `INSERT INTO step_vectors (step_id, embedder, dim, seq, session_id, run_id, kind, step_created_at, vector, created_at)
			VALUES ('2', 'e3', 2, 99, 's', '', 'user', 0, '\x0000803f0000803f', 0)`,
		"bytes of another dim": `INSERT INTO step_vectors (step_id, embedder, dim, seq, session_id, run_id, kind, step_created_at, vector, created_at)
			VALUES ('2', 'e3', 3, 99, 's', '', 'user', 0, '\x0000803f0000803f', 0)`,
	} {
		if _, err := conn.Exec(ctx, q); err == nil {
			t.Errorf("%s: the schema accepted the row", name)
		}
	}
}
