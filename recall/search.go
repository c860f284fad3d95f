package recall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/render"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Query is a search over past steps; see wire.SearchQuery. Texts and K are
// required; the filters combine with AND and empty ones match everything.
type Query = wire.SearchQuery

// Hit is a step found by a search.
type Hit = wire.SearchHit

// QueryWithSteps is the result of a search: the queries and the steps
// found, best first. Its JSON is wire.SearchResult's, to which it
// converts.
type QueryWithSteps wire.SearchResult

// StepList returns the steps of the hits, best first.
func (r *QueryWithSteps) StepList() []*stepwise.Step {
	out := make([]*stepwise.Step, len(r.Steps))
	for i, h := range r.Steps {
		out[i] = h.Step
	}
	return out
}

// Render renders the hits as text for a model or a terminal: a header per
// hit (rank, score, session, time) followed by the step rendered with
// render.Steps (its Action, Decision, Call Program or End Program
// template).
func (r *QueryWithSteps) Render() string {
	if len(r.Steps) == 0 {
		return "No matching past steps."
	}
	var b strings.Builder
	for i, h := range r.Steps {
		if i > 0 {
			b.WriteString("\n\n")
		}
		s := h.Step
		fmt.Fprintf(&b, "[%d] score %.3f · session %s · %s %s\n", i+1, h.Score, s.SessionID, s.Kind, s.CreatedAt.UTC().Format(time.DateTime))
		b.WriteString(render.Steps([]*stepwise.Step{s}))
	}
	return b.String()
}

// Searcher searches past steps. The zero value is not usable: set Store
// and Embedder.
type Searcher struct {
	// Store must implement store.VectorStore. Required.
	Store store.Store
	// Embedder embeds the query texts; it must be the embedder (same Name)
	// that embedded the steps. Required.
	Embedder Embedder
	// Reranker, when set, reorders (and may drop) the candidates found by
	// similarity before they are cut to K.
	Reranker Reranker
	// Candidates is how many steps similarity search hands to the
	// Reranker. Default 3×K (at most store.MaxVectorK); unused without one.
	Candidates int
}

// Search searches with the given store and embedder and no reranker; see
// Searcher.Search. It is what the CLI command `stepwise search` and the
// HTTP endpoint call.
func Search(ctx context.Context, st store.Store, emb Embedder, q Query) (*QueryWithSteps, error) {
	return (&Searcher{Store: st, Embedder: emb}).Search(ctx, q)
}

// Search embeds the query texts, finds the most similar stored steps of
// the searcher's embedder that pass the filters, merges the hits of every
// text (best score per step), reranks when a Reranker is set, and returns
// at most K, best first.
//
// Errors: bad queries (no text, K < 1, negative MaxDistance, unknown kind)
// wrap store.ErrInvalid; a store without vectors of this embedder wraps
// store.ErrNoVectors and names the embedders it does have; a query vector
// of another dimension wraps store.ErrDimensionMismatch.
func (s *Searcher) Search(ctx context.Context, q Query) (*QueryWithSteps, error) {
	texts, err := checkQuery(&q)
	if err != nil {
		return nil, err
	}
	if s.Embedder == nil {
		return nil, invalid("searcher has no embedder")
	}
	vs, err := vectorStore(s.Store)
	if err != nil {
		return nil, err
	}
	n := q.K
	if s.Reranker != nil {
		n = cmp.Or(s.Candidates, 3*q.K)
		n = min(max(n, q.K), store.MaxVectorK)
	}
	vecs, err := embed(ctx, s.Embedder, texts)
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	name := s.Embedder.Name()
	best := map[string]*Hit{}
	for i, v := range vecs {
		hits, err := vs.VectorSearch(ctx, &store.VectorSearchParams{
			Embedder: name, Vector: v, K: n, MaxDistance: q.MaxDistance,
			Agent: q.Agent, SessionIDs: q.SessionIDs, ExcludeRunIDs: q.ExcludeRunIDs, Kinds: q.Kinds,
			After: q.After, Before: q.Before,
		})
		if err != nil {
			return nil, explain(ctx, vs, name, err)
		}
		for _, h := range hits {
			if old := best[h.Step.ID]; old == nil || h.Distance < old.Distance {
				best[h.Step.ID] = &Hit{Step: h.Step, Score: 1 - h.Distance, Distance: h.Distance, Query: i}
			}
		}
	}
	hits := make([]*Hit, 0, len(best))
	for _, h := range best {
		hits = append(hits, h)
	}
	slices.SortFunc(hits, func(a, b *Hit) int {
		return cmp.Or(cmp.Compare(a.Distance, b.Distance), strings.Compare(a.Step.ID, b.Step.ID))
	})
	if len(hits) > n {
		hits = hits[:n]
	}
	if s.Reranker != nil && len(hits) > 0 {
		if hits, err = rerank(ctx, s.Reranker, texts, hits); err != nil {
			return nil, fmt.Errorf("rerank: %w", err)
		}
	}
	if len(hits) > q.K {
		hits = hits[:q.K]
	}
	return &QueryWithSteps{Queries: texts, Embedder: name, Steps: hits}, nil
}

// checkQuery validates q and returns its non-blank texts.
func checkQuery(q *Query) ([]string, error) {
	var texts []string
	for _, t := range q.Texts {
		if t = strings.TrimSpace(t); t != "" {
			texts = append(texts, t)
		}
	}
	switch {
	case len(texts) == 0:
		return nil, invalid("the query has no text")
	case q.K < 1:
		return nil, invalid("k must be at least 1, got %d", q.K)
	case q.K > store.MaxVectorK:
		return nil, invalid("k must be at most %d, got %d", store.MaxVectorK, q.K)
	case q.MaxDistance < 0 || q.MaxDistance > 2:
		return nil, invalid("max distance must be in [0, 2] (0 means no limit), got %v", q.MaxDistance)
	}
	for _, k := range q.Kinds {
		if !k.Valid() {
			return nil, invalid("unknown step kind %q (want one of %v)", k, steptype.Kinds)
		}
	}
	return texts, nil
}

// explain adds to ErrNoVectors what the store does hold, so that a user
// who switched embedders, or never embedded, knows what to do.
func explain(ctx context.Context, vs store.VectorStore, name string, err error) error {
	if !errors.Is(err, store.ErrNoVectors) {
		return err
	}
	totals, cerr := vs.VectorCount(ctx, &store.VectorCountParams{})
	var have []string
	if cerr == nil {
		for _, t := range totals {
			if t.Count > 0 {
				have = append(have, fmt.Sprintf("%s (%d dims, %d steps)", t.Embedder, t.Dim, t.Count))
			}
		}
	}
	if len(have) == 0 {
		return fmt.Errorf("%w: no step of this database is embedded yet; run a backfill (recall.Backfill) or the embedding worker", err)
	}
	return fmt.Errorf("%w: the database has vectors of %s only; search with that embedder, or backfill with %s",
		err, strings.Join(have, ", "), name)
}
