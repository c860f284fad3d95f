package memory

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rollup"
)

// Metrics implements store.MetricsStore with one pass over runs, steps and
// evals.
func (m *Store) Metrics(_ context.Context, p *store.MetricsParams) (*store.Metrics, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	b := rollup.NewBuilder(p)
	key := func(sessionID string) string {
		if p.Split == "" {
			return ""
		}
		if row := m.sessions[sessionID]; row != nil {
			return rollup.SplitKeyOf(row.s.Metadata, p.Split)
		}
		return ""
	}
	agentOf := func(runID, sessionID string) string {
		if r := m.runs.get(runID); r != nil {
			return r.Agent
		}
		if row := m.sessions[sessionID]; row != nil {
			return row.s.Agent
		}
		return ""
	}
	for _, r := range m.runs.all() {
		if r.FinishedAt.IsZero() || (p.Agent != "" && r.Agent != p.Agent) {
			continue
		}
		i, ok := b.Index(r.FinishedAt)
		if !ok {
			continue
		}
		var failed int64
		if r.Status == steptype.RunFailed {
			failed = 1
		}
		k := key(r.SessionID)
		b.AddRuns(i, k, 1, failed)
		b.AddLatency(i, k, float64(r.FinishedAt.Sub(r.CreatedAt))/1e6)
	}
	for _, row := range m.steps.all() {
		s := &row.packedNums
		i, ok := b.Index(s.created.time())
		if !ok || (p.Agent != "" && agentOf(row.runID(), row.sessionID()) != p.Agent) {
			continue
		}
		var errs int64
		if row.kind() == steptype.KindError || m.status(row) == steptype.StepFailed {
			errs = 1
		}
		b.AddSteps(i, key(row.sessionID()), 1, errs, s.in, s.out, s.cost)
	}
	if m.obsd != nil {
		for _, e := range m.obsd.evals {
			i, ok := b.Index(e.e.CreatedAt)
			if !ok || (p.Agent != "" && agentOf(e.e.RunID, e.e.SessionID) != p.Agent) {
				continue
			}
			b.AddEvals(i, key(e.e.SessionID), e.e.Score, 1)
		}
	}
	return b.Result(), nil
}
