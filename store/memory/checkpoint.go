package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// ContextCheckpointPut implements store.ContextCheckpointStore.
func (m *Store) ContextCheckpointPut(_ context.Context, p *store.ContextCheckpointPutParams) error {
	if err := rules.CheckCheckpoints(p); err != nil {
		return err
	}
	if err := m.rlock(); err != nil {
		return err
	}
	defer m.mu.RUnlock()
	m.cpsMu.Lock()
	defer m.cpsMu.Unlock()
	for _, c := range p.Checkpoints {
		if !m.anchored(c) {
			continue
		}
		if m.cps == nil {
			m.cps = make(map[string]map[int64]*store.ContextCheckpoint)
		}
		bySeq := m.cps[c.SessionID]
		if bySeq == nil {
			bySeq = make(map[int64]*store.ContextCheckpoint)
			m.cps[c.SessionID] = bySeq
		}
		bySeq[c.Sequence] = cloneCheckpoint(c)
	}
	return nil
}

// ContextCheckpointList implements store.ContextCheckpointStore. A
// checkpoint whose step was deleted (truncation, retention) is dropped here:
// it lives and dies with its step, as in the SQL drivers' foreign key.
func (m *Store) ContextCheckpointList(_ context.Context, p *store.ContextCheckpointListParams) ([]*store.ContextCheckpoint, error) {
	if p == nil || p.SessionID == "" {
		return nil, rules.Invalid("session id is required")
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	m.cpsMu.Lock()
	defer m.cpsMu.Unlock()
	var out []*store.ContextCheckpoint
	for seq, c := range m.cps[p.SessionID] {
		if !m.anchored(c) {
			delete(m.cps[p.SessionID], seq)
			continue
		}
		if p.MaxSeq <= 0 || seq <= p.MaxSeq {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *store.ContextCheckpoint) int { return cmp.Compare(b.Sequence, a.Sequence) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	for i, c := range out {
		out[i] = cloneCheckpoint(c)
	}
	return out, nil
}

// anchored reports whether the step a checkpoint was taken at is stored
// (a row's id, session and sequence never change).
func (m *Store) anchored(c *store.ContextCheckpoint) bool {
	r := m.steps.get(c.StepID)
	return r != nil && r.sessionID() == c.SessionID && r.seq == c.Sequence
}

func cloneCheckpoint(c *store.ContextCheckpoint) *store.ContextCheckpoint {
	out := *c
	out.State = slices.Clone(c.State)
	return &out
}
