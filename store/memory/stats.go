package memory

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// SessionStats implements store.SessionStatsReader by counting (memory
// keeps no totals: its reads are in memory anyway).
func (m *Store) SessionStats(_ context.Context, p *store.SessionStatsParams) (*store.SessionStats, error) {
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("session stats need a session id")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.ID)
	if err != nil {
		return nil, err
	}
	type key struct {
		kind steptype.Kind
		role steptype.Role
	}
	by := map[key]*store.StepStat{}
	out := &store.SessionStats{Steps: []store.StepStat{}, Runs: map[steptype.RunStatus]int{}}
	for _, rows := range [][]*stepRow{sr.pre, sr.steps} {
		for _, r := range rows {
			p := m.snap(r)
			k := key{r.kind(), p.role()}
			st := by[k]
			if st == nil {
				st = &store.StepStat{Kind: k.kind, Role: k.role}
				by[k] = st
			}
			st.Steps++
			st.InputTokens += p.in
			st.OutputTokens += p.out
			st.CachedTokens += p.cached
			st.Cost += p.cost
		}
	}
	for _, st := range by {
		out.Steps = append(out.Steps, *st)
	}
	m.runs.each(func(_ string, r *steptype.Run) bool {
		if r.SessionID == p.ID {
			out.Runs[r.Status]++
		}
		return true
	})
	return out, nil
}
