package recall

import "context"

// Reranker reorders the candidates of a search. It receives the query
// texts and the candidates best first by similarity, and returns the ones
// to keep, best first; it may drop candidates, and its Hit.Score may be
// rewritten. Hits it returns that were not among the candidates, and
// repeated ones, are ignored.
type Reranker interface {
	Rerank(ctx context.Context, queries []string, hits []*Hit) ([]*Hit, error)
}

// RerankFunc adapts a function to a Reranker: custom rerankers in Go
// (recency boosts, kind preferences, business rules) need nothing more.
//
//	recent := recall.RerankFunc(func(ctx context.Context, q []string, hits []*recall.Hit) ([]*recall.Hit, error) {
//		slices.SortStableFunc(hits, func(a, b *recall.Hit) int { return b.Step.CreatedAt.Compare(a.Step.CreatedAt) })
//		return hits, nil
//	})
type RerankFunc func(ctx context.Context, queries []string, hits []*Hit) ([]*Hit, error)

// Rerank calls f.
func (f RerankFunc) Rerank(ctx context.Context, queries []string, hits []*Hit) ([]*Hit, error) {
	return f(ctx, queries, hits)
}

// rerank calls r and keeps only the candidates it returns, once each.
func rerank(ctx context.Context, r Reranker, queries []string, hits []*Hit) ([]*Hit, error) {
	cands := make(map[*Hit]bool, len(hits))
	for _, h := range hits {
		cands[h] = true
	}
	// The reranker gets its own slice: it may sort it in place.
	got, err := r.Rerank(ctx, queries, append([]*Hit(nil), hits...))
	if err != nil {
		return nil, err
	}
	out := make([]*Hit, 0, len(got))
	for _, h := range got {
		if cands[h] {
			out = append(out, h)
			delete(cands, h)
		}
	}
	return out, nil
}
