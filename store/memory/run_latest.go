package memory

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// RunLatest implements store.LatestRunReader.
func (m *Store) RunLatest(_ context.Context, p *store.RunLatestParams) (map[string]store.LatestRun, error) {
	if err := rules.CheckRunLatest(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	want := make(map[string]bool, len(p.SessionIDs))
	for _, id := range p.SessionIDs {
		want[id] = true
	}
	out := map[string]store.LatestRun{}
	m.runs.each(func(_ string, r *steptype.Run) bool {
		if r.Hop != 0 || !want[r.SessionID] {
			return true
		}
		l, ok := out[r.SessionID]
		l.Runs++
		if !ok || newestFirst(r, m.runs.get(l.RunID)) < 0 {
			l.RunID, l.Status = r.ID, r.Status
		}
		out[r.SessionID] = l
		return true
	})
	return out, nil
}
