package memory

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// Exclusive reports true: the data lives in this process only.
func (m *Store) Exclusive() bool { return true }

// Health returns nil: memory has nothing to lose under the store.
func (m *Store) Health(context.Context) error { return nil }

// Notifier returns nil: nothing outside this process sees the store.
func (m *Store) Notifier() store.Notifier { return nil }

// busy checks that r would not give its session a second unfinished
// top-level run. The caller holds the session's lock or the exclusive lock.
func (m *Store) busy(r *steptype.Run) error {
	if !rules.UnfinishedTop(r) {
		return nil
	}
	for _, o := range m.sessions[r.SessionID].open {
		if o.ID != r.ID && rules.UnfinishedTop(o) {
			return rules.SessionBusy(r.SessionID)
		}
	}
	return nil
}

// truncatable refuses a truncation while the session has an unfinished
// run: the run would continue on a history that no longer exists.
func (m *Store) truncatable(sr *sessionRow) error {
	for _, r := range sr.open {
		return rules.Unfinished(sr.id, r)
	}
	return nil
}

// setRun stores r in the index and in its session's open runs. The caller
// holds the session's lock or the exclusive lock.
func (m *Store) setRun(r *steptype.Run) {
	m.runs.put(r.ID, r)
	sr := m.sessions[r.SessionID]
	if r.Status.Terminal() {
		delete(sr.open, r.ID)
	} else {
		sr.open[r.ID] = r
	}
}

// errEscalate makes a shared-lock path give up before changing anything:
// the operation touches a session it did not lock, and is redone under the
// exclusive lock.
var errEscalate = errors.New("memory store: escalate to the exclusive lock")

// closing returns the waiting steps that r closes when it replaces old,
// or errEscalate when one of them is in a session that is not locked
// (locked nil: the exclusive lock is held).
func (m *Store) closing(old, r *steptype.Run, locked []*sessionRow) ([]*stepRow, error) {
	if old == nil || !rules.Finishing(old, r) {
		return nil, nil
	}
	rows := m.waits.of(r.ID)
	for _, row := range rows {
		if locked != nil && !slices.ContainsFunc(locked, func(sr *sessionRow) bool { return sr.id == row.sessionID() }) {
			return nil, errEscalate
		}
	}
	return rows, nil
}

// putRun stores r; a run that has just finished closes its waiting steps
// (from closing).
func (m *Store) putRun(r *steptype.Run, closed []*stepRow) {
	m.setRun(r)
	for _, row := range closed {
		s := m.unpack(row)
		rules.CloseWaiting(s, r)
		m.setStep(row, s)
	}
}

// setStep replaces the step of a stored row with the stored form of s
// (which the row does not keep), keeping the waiting index true. The
// caller holds the row's session lock or the exclusive lock.
func (m *Store) setStep(row *stepRow, s *steptype.Step) {
	p := pack(s, &m.sessions[row.sessionID()].arena)
	m.waits.untrack(row)
	row.packedNums, row.sc = p.packedNums, statusCode(s.Status)
	m.extras.set(row, extraOf(&p, s.Status, true))
	m.waits.track(row)
}

// waitIndex holds the waiting steps of each run, so that a finishing run
// closes its waiting steps without scanning the store.
type waitIndex struct {
	mu sync.Mutex
	m  map[string]map[*stepRow]struct{} // by run id
}

// track adds row if it is waiting.
func (w *waitIndex) track(row *stepRow) {
	if !row.waiting() {
		return
	}
	w.mu.Lock()
	set := w.m[row.runID()]
	if set == nil {
		set = map[*stepRow]struct{}{}
		w.m[row.runID()] = set
	}
	set[row] = struct{}{}
	w.mu.Unlock()
}

// untrack removes row.
func (w *waitIndex) untrack(row *stepRow) {
	if !row.waiting() {
		return
	}
	w.mu.Lock()
	if set := w.m[row.runID()]; set != nil {
		delete(set, row)
		if len(set) == 0 {
			delete(w.m, row.runID())
		}
	}
	w.mu.Unlock()
}

// of returns the waiting steps of a run.
func (w *waitIndex) of(runID string) []*stepRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.m[runID]
	if len(set) == 0 {
		return nil
	}
	rows := make([]*stepRow, 0, len(set))
	for row := range set {
		rows = append(rows, row)
	}
	return rows
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
		r := m.runs.get(id)
		if r == nil || r.Status != steptype.RunRunning || r.LeaseOwner != p.Owner || slices.Contains(out, id) {
			continue
		}
		c := rules.CloneRun(r)
		c.LeaseExpires = now.Add(p.Lease)
		m.setRun(c)
		out = append(out, id)
	}
	return out, nil
}

// StepExpiring implements store.Store, from the waiting index.
func (m *Store) StepExpiring(_ context.Context, p *store.StepExpiringParams) ([]*steptype.Step, error) {
	if err := rules.CheckExpiring(p); err != nil {
		return nil, err
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	type due struct {
		at int64
		s  *steptype.Step
	}
	var out []due
	// A row in the waiting index is not being written: setStep takes it
	// out first and puts it back after.
	m.waits.mu.Lock()
	for _, set := range m.waits.m {
		for row := range set {
			s := m.unpack(row)
			if at := rules.ExpiryNanos(s); at > 0 && at <= p.Before.UnixNano() {
				out = append(out, due{at, s})
			}
		}
	}
	m.waits.mu.Unlock()
	slices.SortFunc(out, func(a, b due) int { return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.s.ID, b.s.ID)) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	steps := make([]*steptype.Step, len(out))
	for i, d := range out {
		steps[i] = d.s // unpacked: a copy of its own
	}
	return steps, nil
}
