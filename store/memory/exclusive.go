package memory

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// Exclusive reports true: the data lives in this process only.
func (m *Store) Exclusive() bool { return true }

// Notifier returns nil: nothing outside this process sees the store.
func (m *Store) Notifier() store.Notifier { return nil }

// busy checks, under the lock, that r would not give its session a second
// unfinished top-level run.
func (m *Store) busy(r *steptype.Run) error {
	if !rules.UnfinishedTop(r) {
		return nil
	}
	for _, o := range m.runs {
		if o.ID != r.ID && o.SessionID == r.SessionID && rules.UnfinishedTop(o) {
			return rules.SessionBusy(r.SessionID)
		}
	}
	return nil
}

// truncatable refuses a truncation while the session has an unfinished
// run: the run would continue on a history that no longer exists.
func (m *Store) truncatable(sessionID string) error {
	for _, r := range m.runs {
		if r.SessionID == sessionID && !r.Status.Terminal() {
			return rules.Unfinished(sessionID, r)
		}
	}
	return nil
}

// putRun stores r; a run that has just finished closes its waiting steps.
func (m *Store) putRun(r *steptype.Run) {
	old := m.runs[r.ID]
	m.runs[r.ID] = r
	if old == nil || !rules.Finishing(old, r) {
		return
	}
	for _, row := range m.steps {
		if row.runID == r.ID && row.status == steptype.StepWaiting {
			s := rules.CloneStep(row.step)
			rules.CloseWaiting(s, r)
			row.step, row.status = s, s.Status
		}
	}
}

// RunLeaseRenew implements store.Store.
func (m *Store) RunLeaseRenew(_ context.Context, p *store.RunLeaseRenewParams) ([]string, error) {
	if err := rules.CheckRenew(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := rules.Now(time.Time{})
	out := []string{}
	for _, id := range p.IDs {
		r, ok := m.runs[id]
		if !ok || r.Status != steptype.RunRunning || r.LeaseOwner != p.Owner || slices.Contains(out, id) {
			continue
		}
		c := rules.CloneRun(r)
		c.LeaseExpires = now.Add(p.Lease)
		m.runs[id] = c
		out = append(out, id)
	}
	return out, nil
}

// StepExpiring implements store.Store.
func (m *Store) StepExpiring(_ context.Context, p *store.StepExpiringParams) ([]*steptype.Step, error) {
	if err := rules.CheckExpiring(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	type due struct {
		at int64
		s  *steptype.Step
	}
	var out []due
	for _, row := range m.steps {
		if row.status != steptype.StepWaiting {
			continue
		}
		if at := rules.ExpiryNanos(row.step); at > 0 && at <= p.Before.UnixNano() {
			out = append(out, due{at, row.step})
		}
	}
	slices.SortFunc(out, func(a, b due) int { return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.s.ID, b.s.ID)) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	steps := make([]*steptype.Step, len(out))
	for i, d := range out {
		steps[i] = rules.CloneStep(d.s)
	}
	return steps, nil
}
