package memory

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// RunCount implements store.Store by counting the agent's runs in one
// pass over the run table.
func (m *Store) RunCount(_ context.Context, p *store.RunCountParams) (map[steptype.RunStatus]int, error) {
	if err := rules.CheckRunCount(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := map[steptype.RunStatus]int{}
	m.runs.each(func(_ string, r *steptype.Run) bool {
		if r.Agent == p.Agent {
			out[r.Status]++
		}
		return true
	})
	return out, nil
}
