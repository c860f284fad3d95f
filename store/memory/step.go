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

// StepAppend implements store.Store. Everything is staged first and applied
// only when every step and run update succeeded.
func (m *Store) StepAppend(_ context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	if err := rules.CheckAppend(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := rules.Now(time.Time{})

	staged := make(map[string]*stepRow)            // new rows by id
	sessions := make(map[string]*steptype.Session) // staged session copies
	var newRows []*stepRow
	out := make([]*steptype.Step, 0, len(p.Steps))
	inserted := make([]bool, len(p.Steps))
	for i, in := range p.Steps {
		row := m.steps[in.ID]
		if row == nil {
			row = staged[in.ID]
		}
		if row == nil {
			inserted[i] = true
			sess := sessions[in.SessionID]
			if sess == nil {
				sr, err := m.session(in.SessionID)
				if err != nil {
					return nil, err
				}
				sess = rules.CloneSession(sr.s)
				sessions[sess.ID] = sess
			}
			s, err := rules.PlaceClone(in, sess.LastSequence+1, now)
			if err != nil {
				return nil, err
			}
			row = &stepRow{id: s.ID, sessionID: s.SessionID, runID: s.RunID, seq: s.Sequence,
				kind: s.Kind, status: s.Status, step: rules.NormalizeStep(s)}
			sess.LastSequence = s.Sequence
			sess.UpdatedAt = now
			rules.AddTotals(sess, s, 1)
			staged[row.id] = row
			newRows = append(newRows, row)
		}
		out = append(out, rules.CloneStep(row.step))
	}
	runs := make(map[string]*steptype.Run)
	for _, u := range p.Runs {
		r := runs[u.ID]
		if r == nil {
			cur, ok := m.runs[u.ID]
			if !ok {
				return nil, rules.NotFound("run", u.ID)
			}
			r = rules.CloneRun(cur)
		}
		if err := rules.UpdateRun(r, rules.Counted(u, p.Steps, func(i int) bool { return inserted[i] }), now); err != nil {
			return nil, err
		}
		runs[r.ID] = r
	}
	for _, r := range runs {
		if err := m.busy(r); err != nil {
			return nil, err
		}
	}

	// Commit.
	for _, row := range newRows {
		m.steps[row.id] = row
		sr := m.sessions[row.sessionID]
		sr.steps = append(sr.steps, row)
	}
	for id, s := range sessions {
		m.sessions[id].s = s
	}
	for _, r := range runs {
		m.putRun(r)
	}
	return out, nil
}

// StepList implements store.Store.
func (m *Store) StepList(_ context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	lineage, err := rules.CheckList(p)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if p.SessionID != "" {
		if _, err := m.session(p.SessionID); err != nil {
			return nil, err
		}
	}
	if p.EndSeq > 0 && p.EndSeq < p.StartSeq {
		return []*steptype.Step{}, nil
	}
	var rows []*stepRow
	if lineage {
		for _, r := range m.visible(m.sessions[p.SessionID], p.StartSeq, p.EndSeq) {
			if rules.MatchKinds(p.Kinds, r.kind) {
				rows = append(rows, r)
			}
		}
	} else {
		for _, r := range m.steps {
			if (p.SessionID != "" && r.sessionID != p.SessionID) || (p.RunID != "" && r.runID != p.RunID) ||
				(p.Status != "" && r.status != p.Status) || !rules.MatchKinds(p.Kinds, r.kind) ||
				r.seq < p.StartSeq || (p.EndSeq > 0 && r.seq > p.EndSeq) {
				continue
			}
			rows = append(rows, r)
		}
		slices.SortFunc(rows, func(a, b *stepRow) int {
			if c := cmp.Compare(a.seq, b.seq); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
	}
	if p.Desc {
		slices.Reverse(rows)
	}
	if p.Limit > 0 && len(rows) > p.Limit {
		rows = rows[:p.Limit]
	}
	return decodeRows(rows)
}

// StepGet implements store.Store.
func (m *Store) StepGet(_ context.Context, p *store.StepGetParams) (*steptype.Step, error) {
	if p == nil || (p.ID == "" && p.SessionID == "") {
		return nil, rules.Invalid("step get needs an id, or a session id and a sequence")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if p.ID != "" {
		row, ok := m.steps[p.ID]
		if !ok {
			return nil, rules.NotFound("step", p.ID)
		}
		return rules.CloneStep(row.step), nil
	}
	return m.stepAt(p.SessionID, p.Sequence)
}

// stepAt returns the step visible at seq in a session.
func (m *Store) stepAt(sessionID string, seq int64) (*steptype.Step, error) {
	sr, err := m.session(sessionID)
	if err != nil {
		return nil, err
	}
	if seq < 1 {
		return nil, rules.Invalid("sequence %d < 1", seq)
	}
	rows := m.visible(sr, seq, seq)
	if len(rows) == 0 {
		return nil, rules.NotFound("step at sequence of session", sessionID)
	}
	return rules.CloneStep(rows[0].step), nil
}

// StepLast implements store.Store.
func (m *Store) StepLast(_ context.Context, p *store.StepLastParams) (*steptype.Step, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	if sr.s.LastSequence == 0 {
		return nil, rules.NotFound("last step of session", p.SessionID)
	}
	return m.stepAt(p.SessionID, sr.s.LastSequence)
}

// StepCount implements store.Store. Sequences are gap-free, so the count is
// the last visible sequence.
func (m *Store) StepCount(_ context.Context, p *store.StepCountParams) (int64, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.SessionID)
	if err != nil {
		return 0, err
	}
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
	if err := m.truncatable(p.SessionID); err != nil {
		return 0, err
	}
	if p.StartSeq > sr.s.LastSequence {
		return 0, nil
	}
	sess := rules.CloneSession(sr.s)
	cut := sr.steps[p.StartSeq-sess.ForkSequence-1:]
	for _, row := range cut {
		rules.AddTotals(sess, row.step, -1)
	}
	for _, row := range cut {
		delete(m.steps, row.id)
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
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	row, ok := m.steps[p.ID]
	if !ok {
		return nil, rules.NotFound("step", p.ID)
	}
	s := rules.CloneStep(row.step)
	if err := rules.Resolve(s, p); err != nil {
		return nil, err
	}
	run, hasRun := m.runs[row.runID]
	if hasRun && run.Status.Terminal() {
		return nil, rules.Conflict("run %q of step %q is %s", run.ID, s.ID, run.Status)
	}
	row.step, row.status = s, s.Status
	switch {
	case hasRun && p.FailRun != nil:
		if r := rules.CloneRun(run); rules.FailWaiting(r, p.FailRun, rules.Now(p.Now)) {
			m.putRun(r)
		}
	case hasRun && p.QueueRun && !m.waiting(row.runID):
		if r := rules.CloneRun(run); rules.Requeue(r, rules.Now(p.Now)) {
			m.runs[r.ID] = r
		}
	}
	return rules.CloneStep(s), nil
}

// waiting reports whether a step of run is waiting.
func (m *Store) waiting(runID string) bool {
	for _, r := range m.steps {
		if r.runID == runID && r.status == steptype.StepWaiting {
			return true
		}
	}
	return false
}
