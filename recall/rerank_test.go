package recall_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/stepwisetest"
)

func TestParseRanking(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want string
	}{
		{`{"ids": [3, 1, 2]}`, "[3 1 2]"},
		{"Sure! Here is the ranking:\n```json\n{\"ranking\": [\"2\", \"[4]\", \"#1\"]}\n```\nHope it helps.", "[2 4 1]"},
		{`[2, 2, 9, 0, 1]`, "[2 1]"},
		{`{"order": [{"id": 4}, {"id": 3}]}`, "[4 3]"},
		{`The most relevant are 3 and then 1.`, "[3 1]"},
		{`{"ids": []} but really 2`, "[2]"},
		{`{"note": "x"} [1.5, 2]`, "[2]"},
	} {
		got, err := recall.ParseRanking(c.text, 4)
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("ParseRanking(%q) = %v, %v; want %s", c.text, got, err, c.want)
		}
	}
	for _, text := range []string{"", "none of them", `{"ids": [7, 8]}`} {
		if _, err := recall.ParseRanking(text, 4); !errors.Is(err, recall.ErrRerankOutput) {
			t.Errorf("ParseRanking(%q): err %v, want ErrRerankOutput", text, err)
		}
	}
}

func FuzzParseRanking(f *testing.F) {
	for _, s := range []string{`{"ids":[1,2]}`, "```json\n[3]\n```", "2, 1", `[{"id":"2"}]`, `{"ids":[1e309]}`} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		n = n%50 + 1
		if n < 1 {
			n = -n + 1
		}
		got, err := recall.ParseRanking(text, n)
		if err != nil {
			if !errors.Is(err, recall.ErrRerankOutput) || len(got) != 0 {
				t.Fatalf("err %v with %v", err, got)
			}
			return
		}
		seen := map[int]bool{}
		for _, k := range got {
			if k < 1 || k > n || seen[k] {
				t.Fatalf("ParseRanking(%q, %d) = %v: out of range or repeated", text, n, got)
			}
			seen[k] = true
		}
	})
}

func TestLLMReranker(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st)
	emb := recall.DefaultEmbedder()
	backfill(t, st, emb)
	q := recall.Query{Texts: []string{"billing deploy"}, K: 2}
	plain, err := recall.Search(t.Context(), st, emb, recall.Query{Texts: q.Texts, K: 6})
	if err != nil {
		t.Fatal(err)
	}
	// The model picks the 4th and the 2nd candidate of similarity order.
	model := &stepwisetest.Model{Reply: func(req *llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: "```json\n{\"ids\": [4, 2]}\n```"}, nil
	}}
	for _, drop := range []bool{false, true} {
		s := &recall.Searcher{Store: st, Embedder: emb, Reranker: &recall.LLMReranker{Model: model, DropUnlisted: drop}}
		res, err := s.Search(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		want := plain.Steps[3].Step.ID + " " + plain.Steps[1].Step.ID
		if got := hitIDs(res); got != want {
			t.Errorf("DropUnlisted=%v: got %q, want %q", drop, got, want)
		}
	}
	req := model.Requests()[0]
	prompt := req.Messages[0].Content
	for _, want := range []string{"- billing deploy", "[1]\n", "[6]\n", "deployed billing v2.3", `{"ids": [...]}`} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if req.System != recall.DefaultRerankInstructions || req.Temperature == nil || *req.Temperature != 0 {
		t.Errorf("request: system %q, temperature %v", req.System, req.Temperature)
	}
	// Unlisted candidates follow the listed ones unless dropped.
	s := &recall.Searcher{Store: st, Embedder: emb, Candidates: 6, Reranker: &recall.LLMReranker{Model: model}}
	res, err := s.Search(t.Context(), recall.Query{Texts: q.Texts, K: 6})
	if err != nil || len(res.Steps) != 6 || res.Steps[2].Step.ID != plain.Steps[0].Step.ID {
		t.Errorf("keep unlisted: %v, %v", hitIDs(res), err)
	}

	// Bad answers and failing models are errors, not silent fallbacks.
	for name, reply := range map[string]func(*llm.Request) (*llm.Response, error){
		"garbage": func(*llm.Request) (*llm.Response, error) { return &llm.Response{Content: "I cannot rank these."}, nil },
		"failure": func(*llm.Request) (*llm.Response, error) { return nil, errors.New("boom") },
	} {
		s := &recall.Searcher{Store: st, Embedder: emb, Reranker: &recall.LLMReranker{Model: &stepwisetest.Model{Reply: reply}}}
		if _, err := s.Search(t.Context(), q); err == nil || !strings.Contains(err.Error(), "rerank") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestCustomReranker(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st)
	emb := recall.DefaultEmbedder()
	backfill(t, st, emb)
	var got int
	// Prefer tool steps; also returns a foreign hit and a repeat, which
	// are ignored.
	tools := recall.RerankFunc(func(ctx context.Context, queries []string, hits []*recall.Hit) ([]*recall.Hit, error) {
		got = len(hits)
		isTool := func(h *recall.Hit) bool { return h.Step.Kind == steptype.KindTool }
		slices.SortStableFunc(hits, func(a, b *recall.Hit) int {
			switch {
			case isTool(a) && !isTool(b):
				return -1
			case isTool(b) && !isTool(a):
				return 1
			}
			return 0
		})
		return append(hits, &recall.Hit{Step: hits[0].Step}, hits[0]), nil
	})
	s := &recall.Searcher{Store: st, Embedder: emb, Reranker: tools}
	res, err := s.Search(t.Context(), recall.Query{Texts: []string{"deploy the billing service"}, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got != 6 || hitIDs(res) != "t1 t2" {
		t.Errorf("reranker saw %d candidates (want 3×K=6); result %q, want \"t1 t2\"", got, hitIDs(res))
	}
}
