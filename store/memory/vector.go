package memory

import (
	"context"
	"slices"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// spaces holds the vector spaces of each Store, guarded by the Store's
// mutex, beside the struct so that the core store needs no vector field.

// space is the vectors of one embedder.
type space struct {
	ix *vecindex.Index
	// rows are the step rows the vectors were stored for: a vector whose
	// row is no longer the stored row of its id (deleted by a truncate or a
	// session delete, or deleted and appended again) is stale.
	rows map[string]*stepRow
}

// vectors returns the Store's spaces after dropping stale vectors, the way
// a database cascades a step delete. Called with m.mu held.
func (m *Store) vectors() map[string]*space {
	if m.vec == nil {
		m.vec = make(map[string]*space)
	}
	sp := m.vec
	for _, s := range sp {
		var gone []string
		for id, row := range s.rows {
			if m.steps.get(id) != row {
				gone = append(gone, id)
			}
		}
		for _, id := range gone {
			delete(s.rows, id)
		}
		s.ix.Delete(gone...)
	}
	return sp
}

// VectorUpsert implements store.VectorStore.
func (m *Store) VectorUpsert(_ context.Context, p *store.VectorUpsertParams) (int, error) {
	dim, err := vecindex.CheckUpsert(p)
	if err != nil {
		return 0, err
	}
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	sp := m.vectors()
	s := sp[p.Embedder]
	if len(p.Vectors) == 0 {
		return 0, nil
	}
	if s != nil && s.ix.Dim() != dim {
		return 0, vecindex.DimMismatch(p.Embedder, s.ix.Dim(), dim)
	}
	type put struct {
		e   vecindex.Entry
		v   []float32
		row *stepRow
	}
	var puts []put
	for _, v := range p.Vectors {
		row := m.steps.get(v.StepID)
		if row == nil {
			if p.SkipMissing {
				continue
			}
			return 0, rules.NotFound("step", v.StepID)
		}
		st, err := m.unpack(row), error(nil)
		if err != nil {
			return 0, err
		}
		puts = append(puts, put{entry(st), v.Vector, row})
	}
	if s == nil {
		s = &space{ix: vecindex.New(dim), rows: make(map[string]*stepRow)}
		sp[p.Embedder] = s
	}
	for _, u := range puts {
		s.ix.Put(u.e, u.v)
		s.rows[u.e.StepID] = u.row
	}
	return len(puts), nil
}

// entry is the index entry of a step.
func entry(s *steptype.Step) vecindex.Entry {
	return vecindex.Entry{StepID: s.ID, SessionID: s.SessionID, RunID: s.RunID, Kind: s.Kind, Created: s.CreatedAt.UnixNano()}
}

// VectorSearch implements store.VectorStore.
func (m *Store) VectorSearch(_ context.Context, p *store.VectorSearchParams) ([]*store.VectorHit, error) {
	if err := vecindex.CheckSearch(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	s := m.vectors()[p.Embedder]
	if s == nil || s.ix.Len() == 0 {
		return nil, vecindex.NoVectors(p.Embedder)
	}
	if s.ix.Dim() != len(p.Vector) {
		return nil, vecindex.DimMismatch(p.Embedder, s.ix.Dim(), len(p.Vector))
	}
	var agentSessions []string
	if p.Agent != "" {
		for id, sr := range m.sessions {
			if sr.s.Agent == p.Agent {
				agentSessions = append(agentSessions, id)
			}
		}
	}
	f, ok := vecindex.NewFilter(p, agentSessions)
	if !ok {
		return []*store.VectorHit{}, nil
	}
	res := s.ix.Search(p.Vector, p.K, p.MaxDistance, f)
	out := make([]*store.VectorHit, 0, len(res))
	for _, r := range res {
		st, err := m.unpack(m.steps.get(r.StepID)), error(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, &store.VectorHit{Step: st, Distance: r.Distance})
	}
	return out, nil
}

// VectorMissing implements store.VectorStore.
func (m *Store) VectorMissing(_ context.Context, p *store.VectorMissingParams) ([]*steptype.Step, error) {
	limit, err := vecindex.CheckMissing(p)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	s := m.vectors()[p.Embedder]
	var ids []string
	for id, row := range m.steps.all() {
		if id <= p.AfterID || row.waiting() || !rules.MatchKinds(p.Kinds, row.kind()) {
			continue
		}
		if s != nil && s.rows[id] != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]*steptype.Step, 0, len(ids))
	for _, id := range ids {
		st, err := m.unpack(m.steps.get(id)), error(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// VectorCount implements store.VectorStore.
func (m *Store) VectorCount(_ context.Context, p *store.VectorCountParams) ([]*store.VectorTotal, error) {
	if p == nil {
		p = &store.VectorCountParams{}
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := []*store.VectorTotal{}
	for name, s := range m.vectors() {
		if p.Embedder == "" || p.Embedder == name {
			out = append(out, &store.VectorTotal{Embedder: name, Dim: s.ix.Dim(), Count: int64(s.ix.Len())})
		}
	}
	slices.SortFunc(out, func(a, b *store.VectorTotal) int { return strings.Compare(a.Embedder, b.Embedder) })
	return out, nil
}

// SupportsVectorIndex implements store.VectorStore: searches scan an exact
// in-process index.
func (m *Store) SupportsVectorIndex() bool { return false }
