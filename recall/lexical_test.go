package recall_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/store"
)

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

func TestLexicalDeterministicAndNormalized(t *testing.T) {
	t.Parallel()
	emb := recall.DefaultEmbedder()
	if emb.Name() != "lexical-v1:256" || emb.Dim() != 256 {
		t.Fatalf("default embedder %s dim %d", emb.Name(), emb.Dim())
	}
	texts := []string{"Deploy the billing service", "ÉTÉ à Paris — 2025", "!!!", "a"}
	v1, err := emb.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := recall.NewLexical(recall.LexicalConfig{})
	v2, _ := other.Embed(t.Context(), texts)
	for i := range texts {
		if len(v1[i]) != 256 {
			t.Fatalf("text %d: %d dims", i, len(v1[i]))
		}
		var norm float64
		for j, x := range v1[i] {
			norm += float64(x) * float64(x)
			if x != v2[i][j] {
				t.Fatalf("text %q: two embedders disagree at %d", texts[i], j)
			}
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("text %q: norm² %v, want 1", texts[i], norm)
		}
	}
	// The features are frozen for "lexical-v1": a change must bump the
	// version, or stored vectors would silently stop matching.
	got := fmt.Sprintf("%.4f", cosine(v1[0], mustEmbed(t, emb, "billing service deployment")))
	if got != "0.6717" {
		t.Errorf("cosine(deploy billing, billing deployment) = %s; lexical-v1 features changed?", got)
	}
}

func mustEmbed(t *testing.T, e recall.Embedder, text string) []float32 {
	t.Helper()
	v, err := e.Embed(t.Context(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func TestLexicalSimilarity(t *testing.T) {
	t.Parallel()
	emb := recall.DefaultEmbedder()
	q := mustEmbed(t, emb, "postgres migration failed")
	near := cosine(q, mustEmbed(t, emb, "the postgres migration failed with a lock timeout"))
	fragment := cosine(q, mustEmbed(t, emb, "migrations failing on postgres"))
	far := cosine(q, mustEmbed(t, emb, "write a haiku about autumn leaves"))
	if !(near > fragment && fragment > far && far < 0.2) {
		t.Errorf("cosines: same words %.3f, word fragments %.3f, unrelated %.3f", near, fragment, far)
	}
	// Stop words alone do not make texts similar.
	if s := cosine(mustEmbed(t, emb, "the cat is on the mat"), mustEmbed(t, emb, "the stock is on the rise")); s > 0.2 {
		t.Errorf("texts sharing only stop words: cosine %.3f", s)
	}
}

func TestLexicalBadInput(t *testing.T) {
	t.Parallel()
	for _, dim := range []int{-1, 8, 1 << 17} {
		if _, err := recall.NewLexical(recall.LexicalConfig{Dim: dim}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("dim %d: err %v, want ErrInvalid", dim, err)
		}
	}
	if _, err := recall.DefaultEmbedder().Embed(context.Background(), []string{"ok", "  "}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty text: err %v, want ErrInvalid", err)
	}
}

func TestEmbedderByName(t *testing.T) {
	t.Parallel()
	e, err := recall.EmbedderByName("lexical-v1:64")
	if err != nil || e.Name() != "lexical-v1:64" || e.Dim() != 64 {
		t.Fatalf("EmbedderByName(lexical-v1:64) = %v, %v", e, err)
	}
	for _, name := range []string{"lexical-v1:x", "lexical-v1:4", "openai:text-embedding-3-small", ""} {
		if _, err := recall.EmbedderByName(name); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("EmbedderByName(%q): err %v, want ErrInvalid", name, err)
		}
	}
}
