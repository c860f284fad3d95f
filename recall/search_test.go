package recall_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

func TestSearch(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st)
	emb := recall.DefaultEmbedder()
	if s := backfill(t, st, emb); s.Embedded != 7 || s.Skipped != 0 {
		t.Fatalf("backfill: %+v", s)
	}
	ctx := t.Context()
	for _, c := range []struct {
		name string
		q    recall.Query
		want string
	}{
		{"best first", recall.Query{Texts: []string{"postgres migration lock timeout"}, K: 2}, "u2 t2"},
		{"tool result", recall.Query{Texts: []string{"billing deployed to eu-west-1"}, K: 1}, "t1"},
		{"agent", recall.Query{Texts: []string{"autumn leaves billing"}, K: 10, Agent: "helper"}, "u3 l3"},
		{"session", recall.Query{Texts: []string{"deploy billing"}, K: 10, SessionIDs: []string{"s-db", "s-chat"}, MaxDistance: 0.9}, ""},
		{"kinds", recall.Query{Texts: []string{"billing service"}, K: 1, Kinds: []steptype.Kind{steptype.KindTool}}, "t1"},
		{"time", recall.Query{Texts: []string{"deploy billing"}, K: 2, After: t0.Add(2 * time.Minute), Before: t0.Add(4 * time.Minute)}, "t1 u2"},
		{"exclude run", recall.Query{Texts: []string{"deploy billing"}, K: 1, ExcludeRunIDs: []string{"r1"}}, "t2"},
		{"max distance", recall.Query{Texts: []string{"red autumn leaves"}, K: 10, MaxDistance: 0.75}, "u3 l3"},
		{"several queries", recall.Query{Texts: []string{"haiku about leaves", "ERROR lock timeout on table invoices"}, K: 2}, "t2 u3"},
	} {
		res, err := recall.Search(ctx, st, emb, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := hitIDs(res); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	res, err := recall.Search(ctx, st, emb, recall.Query{Texts: []string{" ", "haiku about leaves", "ERROR lock timeout on table invoices"}, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Queries) != 2 || res.Embedder != "lexical-v1:256" || res.Steps[0].Query != 1 || res.Steps[1].Query != 0 {
		t.Errorf("result: queries %q, embedder %s, hit queries %d %d", res.Queries, res.Embedder, res.Steps[0].Query, res.Steps[1].Query)
	}
	h := res.Steps[0]
	if h.Score <= 0 || h.Score > 1 || h.Distance != 1-h.Score || h.Step.Content != "ERROR: lock timeout on table invoices" {
		t.Errorf("hit %+v", h)
	}
	text := res.Render()
	for _, want := range []string{"[1] score", "session s-db", "Action Purpose: call run_sql", "lock timeout on table invoices", "[2] score", "User: write a haiku"} {
		if !strings.Contains(text, want) {
			t.Errorf("Render lacks %q:\n%s", want, text)
		}
	}
}

func TestSearchBadInput(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st)
	emb := recall.DefaultEmbedder()
	ctx := t.Context()

	// A database without embeddings.
	_, err := recall.Search(ctx, st, emb, recall.Query{Texts: []string{"x"}, K: 1})
	if !errors.Is(err, store.ErrNoVectors) || !strings.Contains(err.Error(), "no step of this database is embedded yet") {
		t.Errorf("no embeddings: %v", err)
	}
	backfill(t, st, emb)
	for _, c := range []struct {
		name string
		q    recall.Query
	}{
		{"k=0", recall.Query{Texts: []string{"x"}}},
		{"k<0", recall.Query{Texts: []string{"x"}, K: -3}},
		{"k too big", recall.Query{Texts: []string{"x"}, K: store.MaxVectorK + 1}},
		{"no text", recall.Query{K: 1}},
		{"blank text", recall.Query{Texts: []string{" \n"}, K: 1}},
		{"negative distance", recall.Query{Texts: []string{"x"}, K: 1, MaxDistance: -0.1}},
		{"distance above 2", recall.Query{Texts: []string{"x"}, K: 1, MaxDistance: 3}},
		{"unknown kind", recall.Query{Texts: []string{"x"}, K: 1, Kinds: []steptype.Kind{"thought"}}},
		{"empty range", recall.Query{Texts: []string{"x"}, K: 1, After: t0, Before: t0.Add(-time.Hour)}},
	} {
		if _, err := recall.Search(ctx, st, emb, c.q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", c.name, err)
		}
	}

	// Another embedder: its vectors are never compared with lexical ones.
	other, _ := recall.NewLexical(recall.LexicalConfig{Dim: 64})
	_, err = recall.Search(ctx, st, other, recall.Query{Texts: []string{"billing"}, K: 1})
	if !errors.Is(err, store.ErrNoVectors) || !strings.Contains(err.Error(), "lexical-v1:256 (256 dims, 7 steps)") {
		t.Errorf("switched embedder: %v", err)
	}
	// An embedder that claims the stored name with another dimension.
	_, err = recall.Search(ctx, st, renamed{other, emb.Name()}, recall.Query{Texts: []string{"billing"}, K: 1})
	if !errors.Is(err, store.ErrDimensionMismatch) {
		t.Errorf("same name, other dimension: %v", err)
	}
	if _, err := recall.Backfill(ctx, recall.WorkerConfig{Store: st, Embedder: renamed{other, emb.Name()}}); err != nil {
		t.Errorf("backfill with nothing missing: %v", err)
	}
	st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "u4", SessionID: "s-chat", Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "more"}}})
	if _, err := recall.Backfill(ctx, recall.WorkerConfig{Store: st, Embedder: renamed{other, emb.Name()}}); !errors.Is(err, store.ErrDimensionMismatch) {
		t.Errorf("backfill with another dimension under the stored name: %v", err)
	}
	// No store.
	if _, err := recall.Search(ctx, nil, emb, recall.Query{Texts: []string{"x"}, K: 1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no store: %v", err)
	}
	// Nothing matching the filters is an empty result.
	res, err := recall.Search(ctx, st, emb, recall.Query{Texts: []string{"x"}, K: 3, Agent: "nobody"})
	if err != nil || len(res.Steps) != 0 || res.Render() != "No matching past steps." {
		t.Errorf("no match: %+v, %v", res, err)
	}
}

// renamed is an embedder under another name.
type renamed struct {
	recall.Embedder
	name string
}

func (r renamed) Name() string { return r.name }

// badEmbedder returns wrong answers.
type badEmbedder struct{ vecs [][]float32 }

func (badEmbedder) Name() string { return "bad" }
func (badEmbedder) Dim() int     { return 2 }
func (b badEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return b.vecs, nil
}

func TestSearchBadEmbedder(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	for _, vecs := range [][][]float32{nil, {{1, 2, 3}}, {{}}} {
		_, err := recall.Search(t.Context(), st, badEmbedder{vecs}, recall.Query{Texts: []string{"x"}, K: 1})
		if !errors.Is(err, recall.ErrEmbedder) {
			t.Errorf("embedder returning %v: err %v, want ErrEmbedder", vecs, err)
		}
	}
}
