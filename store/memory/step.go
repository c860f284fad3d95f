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

// StepList implements store.Store. A read along a session's lineage holds
// the shared lock and the lineage's session locks; a read by run holds the
// shared lock and the locks of the sessions the run's steps are in; a read
// by status scans every step under the exclusive lock.
func (m *Store) StepList(_ context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	lineage, err := rules.CheckList(p)
	if err != nil {
		return nil, err
	}
	var packed []packedStep
	switch {
	case lineage:
		packed, err = m.listLineage(p)
	case p.RunID != "":
		if packed, err = m.listRun(p); err == errEscalate {
			packed, err = m.listScan(p)
		}
	default:
		packed, err = m.listScan(p)
	}
	if err != nil {
		return nil, err
	}
	steps := make([]*steptype.Step, len(packed))
	for i := range packed {
		steps[i] = packed[i].step()
	}
	return steps, nil
}

// listLineage reads the steps visible in a session (snapshots).
func (m *Store) listLineage(p *store.StepListParams) ([]packedStep, error) {
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	sr, err := m.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	if p.EndSeq > 0 && p.EndSeq < p.StartSeq {
		return nil, nil
	}
	defer unlockSessions(lockSessions(m.lineage(sr)))
	var rows []*stepRow
	for _, r := range m.visible(sr, p.StartSeq, p.EndSeq) {
		if rules.MatchKinds(p.Kinds, r.kind()) {
			rows = append(rows, r)
		}
	}
	return m.snapshot(rows, p), nil
}

// listRun reads a run's steps (snapshots) under the shared lock and the
// locks of the sessions they are in, or returns errEscalate when one was
// stored meanwhile in a session it did not lock.
func (m *Store) listRun(p *store.StepListParams) ([]packedStep, error) {
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	if empty, err := m.listEmpty(p); empty || err != nil {
		return nil, err
	}
	var sessions []*sessionRow
	for _, r := range m.steps.runRows(p.RunID) {
		if sr := m.sessions[r.sessionID()]; sr != nil && !slices.Contains(sessions, sr) {
			sessions = append(sessions, sr)
		}
	}
	defer unlockSessions(lockSessions(sessions))
	var rows []*stepRow
	for _, r := range m.steps.runRows(p.RunID) {
		if !slices.Contains(sessions, m.sessions[r.sessionID()]) {
			return nil, errEscalate
		}
		if m.matchRow(r, p) {
			rows = append(rows, r)
		}
	}
	sortRows(rows)
	return m.snapshot(rows, p), nil
}

// listEmpty reports an unknown session (an error) or a range that holds
// nothing (true): what a read by run or status checks first, under a lock.
func (m *Store) listEmpty(p *store.StepListParams) (bool, error) {
	if p.SessionID != "" {
		if _, err := m.session(p.SessionID); err != nil {
			return true, err
		}
	}
	return p.EndSeq > 0 && p.EndSeq < p.StartSeq, nil
}

// matchRow reports whether a row passes a list's filters.
func (m *Store) matchRow(r *stepRow, p *store.StepListParams) bool {
	return (p.SessionID == "" || r.sessionID() == p.SessionID) && (p.RunID == "" || r.runID() == p.RunID) &&
		(p.Status == "" || m.status(r) == p.Status) && rules.MatchKinds(p.Kinds, r.kind()) &&
		r.seq >= p.StartSeq && (p.EndSeq <= 0 || r.seq <= p.EndSeq)
}

// sortRows orders rows by sequence, then id.
func sortRows(rows []*stepRow) {
	slices.SortFunc(rows, func(a, b *stepRow) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return strings.Compare(a.id(), b.id())
	})
}

// listScan reads steps by run (the run's rows) or status (every row),
// snapshots, under the exclusive lock.
func (m *Store) listScan(p *store.StepListParams) ([]packedStep, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if empty, err := m.listEmpty(p); empty || err != nil {
		return nil, err
	}
	var rows []*stepRow
	if p.RunID != "" {
		for _, r := range m.steps.ofRun(p.RunID) {
			if m.matchRow(r, p) {
				rows = append(rows, r)
			}
		}
	} else {
		m.steps.each(func(_ string, r *stepRow) bool {
			if m.matchRow(r, p) {
				rows = append(rows, r)
			}
			return true
		})
	}
	sortRows(rows)
	return m.snapshot(rows, p), nil
}

// snapshot orders and limits rows and returns copies of their packed
// steps, to unpack after unlocking.
func (m *Store) snapshot(rows []*stepRow, p *store.StepListParams) []packedStep {
	if p.Desc {
		slices.Reverse(rows)
	}
	if p.Limit > 0 && len(rows) > p.Limit {
		rows = rows[:p.Limit]
	}
	out := make([]packedStep, len(rows))
	for i, r := range rows {
		out[i] = m.snap(r)
	}
	return out
}

// StepGet implements store.Store.
func (m *Store) StepGet(_ context.Context, p *store.StepGetParams) (*steptype.Step, error) {
	if p == nil || (p.ID == "" && p.SessionID == "") {
		return nil, rules.Invalid("step get needs an id, or a session id and a sequence")
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	var s packedStep
	if p.ID != "" {
		row := m.steps.get(p.ID)
		if row == nil {
			m.mu.RUnlock()
			return nil, rules.NotFound("step", p.ID)
		}
		sr := m.sessions[row.sessionID()]
		sr.mu.Lock()
		s = m.snap(row)
		sr.mu.Unlock()
	} else {
		var err error
		if s, err = m.stepAt(p.SessionID, p.Sequence, false); err != nil {
			m.mu.RUnlock()
			return nil, err
		}
	}
	m.mu.RUnlock()
	return s.step(), nil
}

// stepAt returns the step visible at seq in a session (a snapshot), or
// the last one. The caller holds the shared lock.
func (m *Store) stepAt(sessionID string, seq int64, last bool) (packedStep, error) {
	sr, err := m.session(sessionID)
	if err != nil {
		return packedStep{}, err
	}
	if !last && seq < 1 {
		return packedStep{}, rules.Invalid("sequence %d < 1", seq)
	}
	defer unlockSessions(lockSessions(m.lineage(sr)))
	if last {
		if seq = sr.s.LastSequence; seq == 0 {
			return packedStep{}, rules.NotFound("last step of session", sessionID)
		}
	}
	rows := m.visible(sr, seq, seq)
	if len(rows) == 0 {
		return packedStep{}, rules.NotFound("step at sequence of session", sessionID)
	}
	return m.snap(rows[0]), nil
}

// StepLast implements store.Store.
func (m *Store) StepLast(_ context.Context, p *store.StepLastParams) (*steptype.Step, error) {
	if err := m.rlock(); err != nil {
		return nil, err
	}
	s, err := m.stepAt(p.SessionID, 0, true)
	m.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return s.step(), nil
}

// StepCount implements store.Store. Sequences are gap-free, so the count is
// the last visible sequence.
func (m *Store) StepCount(_ context.Context, p *store.StepCountParams) (int64, error) {
	if err := m.rlock(); err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	sr, err := m.session(p.SessionID)
	if err != nil {
		return 0, err
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.s.LastSequence, nil
}

// StepTruncate implements store.Store.
func (m *Store) StepTruncate(_ context.Context, p *store.StepTruncateParams) (int64, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.SessionID)
	if err != nil {
		return 0, err
	}
	if err := rules.CheckTruncate(p, sr.s, m.forksOf(p.SessionID)); err != nil {
		return 0, err
	}
	if err := m.truncatable(sr); err != nil {
		return 0, err
	}
	if p.StartSeq > sr.s.LastSequence {
		return 0, nil
	}
	sess := rules.CloneSession(sr.s)
	cut := sr.steps[p.StartSeq-sess.ForkSequence-1:]
	for _, row := range cut {
		row.addTotals(sess, -1)
	}
	for _, row := range cut {
		m.steps.del(row.id(), row)
		m.waits.untrack(row)
		m.extras.drop(row)
	}
	sess.LastSequence = p.StartSeq - 1
	if !p.KeepActivity {
		sess.UpdatedAt = rules.Now(time.Time{})
	}
	sr.s = sess
	sr.steps = slices.Clip(sr.steps[:len(sr.steps)-len(cut)])
	return int64(len(cut)), nil
}

// StepResolve implements store.Store.
func (m *Store) StepResolve(_ context.Context, p *store.StepResolveParams) (*steptype.Step, error) {
	if err := rules.CheckResolve(p); err != nil {
		return nil, err
	}
	s, err := m.stepResolve(p, true)
	if err == errEscalate {
		s, err = m.stepResolve(p, false)
	}
	if err != nil {
		return nil, err
	}
	return s, nil // the row keeps its packed copy: s is the caller's
}

// stepResolve applies a resolve under the shared lock and the locks of the
// step's and its run's sessions (shared) or under the exclusive lock.
func (m *Store) stepResolve(p *store.StepResolveParams, shared bool) (*steptype.Step, error) {
	var locked []*sessionRow
	if shared {
		if err := m.rlock(); err != nil {
			return nil, err
		}
		defer m.mu.RUnlock()
		row := m.steps.get(p.ID)
		if row == nil {
			return nil, rules.NotFound("step", p.ID)
		}
		locked = append(locked, m.sessions[row.sessionID()])
		if run := m.runs.get(row.runID()); run != nil {
			locked = append(locked, m.sessions[run.SessionID])
		}
		locked = lockSessions(locked)
		defer unlockSessions(locked)
	} else {
		if err := m.lock(); err != nil {
			return nil, err
		}
		defer m.mu.Unlock()
	}
	row := m.steps.get(p.ID)
	if row == nil {
		return nil, rules.NotFound("step", p.ID)
	}
	s := m.unpack(row)
	if err := rules.Resolve(s, p); err != nil {
		return nil, err
	}
	run := m.runs.get(row.runID())
	if run != nil && run.Status.Terminal() {
		return nil, rules.Conflict("run %q of step %q is %s", run.ID, s.ID, run.Status)
	}
	// The run's other waiting steps, and this one if it still waits.
	var waiting []*stepRow
	for _, w := range m.waits.of(row.runID()) {
		if w != row {
			if !holds(locked, w.sessionID()) {
				return nil, errEscalate
			}
			waiting = append(waiting, w)
		}
	}
	if s.Status == steptype.StepWaiting {
		waiting = append(waiting, row)
	}
	var put *steptype.Run
	switch {
	case run != nil && p.FailRun != nil:
		if r := rules.CloneRun(run); rules.FailWaiting(r, p.FailRun, rules.Now(p.Now)) {
			put = r
		}
	case run != nil && p.QueueRun && len(waiting) == 0:
		if r := rules.CloneRun(run); rules.Requeue(r, rules.Now(p.Now)) {
			put = r
		}
	}
	m.setStep(row, s)
	if put != nil {
		var closed []*stepRow
		if rules.Finishing(run, put) {
			closed = waiting
		}
		m.putRun(put, closed)
	}
	return s, nil
}
