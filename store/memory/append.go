package memory

import (
	"context"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// StepAppend implements store.Store. Everything is staged first and applied
// only when every step and run update succeeded. The copies are made
// outside the locks: the input's before, the caller's of the placed steps
// after (a stored step is replaced, never changed in place). With
// p.InPlace a new row is returned as the given step, placed, instead of a
// second copy.
func (m *Store) StepAppend(_ context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	if err := rules.CheckAppend(p); err != nil {
		return nil, err
	}
	clones := make([]*steptype.Step, len(p.Steps))
	for i, in := range p.Steps {
		clones[i] = rules.NormalizeStep(rules.CloneStep(in))
	}
	// stepAppend returns the stored steps in clones' place: keep the clones
	// to tell a new row (its step is the clone) from a stored one.
	var freshBuf [4]*steptype.Step
	fresh := append(freshBuf[:0], clones...)
	placed, err := m.stepAppend(p, clones, true)
	if err == errEscalate {
		copy(clones, fresh) // the first attempt may have replaced some
		placed, err = m.stepAppend(p, clones, false)
	}
	if err != nil {
		return nil, err
	}
	for i, s := range placed {
		if p.InPlace && s == fresh[i] {
			// A new row, handed over: the caller's step gets what was
			// placed and is returned; the store keeps its own copy.
			placed[i] = rules.HandOver(p.Steps[i], s.Sequence, s.CreatedAt)
			continue
		}
		placed[i] = rules.CloneStep(s)
	}
	return placed, nil
}

// appendLocks locks, under the shared lock, the sessions an append
// touches: those of its steps (and of steps already stored under their
// ids) and those of its runs. An unknown session or run escalates: the
// exclusive path reports it.
func (m *Store) appendLocks(p *store.StepAppendParams, rows []*sessionRow) ([]*sessionRow, error) {
	for _, in := range p.Steps {
		sr := m.sessions[in.SessionID]
		if sr == nil {
			return nil, errEscalate
		}
		rows = append(rows, sr)
		if old := m.steps.get(in.ID); old != nil && old.sessionID != in.SessionID {
			rows = append(rows, m.sessions[old.sessionID])
		}
	}
	for _, u := range p.Runs {
		r := m.runs.get(u.ID)
		if r == nil {
			return nil, errEscalate
		}
		rows = append(rows, m.sessions[r.SessionID])
	}
	return lockSessions(rows), nil
}

// holds reports whether a session is locked (locked nil: the exclusive
// lock is held).
func holds(locked []*sessionRow, sessionID string) bool {
	if locked == nil {
		return true
	}
	for _, sr := range locked {
		if sr.id == sessionID {
			return true
		}
	}
	return false
}

// stagedSession is a session's record as an append leaves it.
type stagedSession struct {
	sr *sessionRow
	s  *steptype.Session
}

// stagedRun is a run as an append leaves it.
type stagedRun struct {
	cur, r *steptype.Run
	closed []*stepRow
}

// counted is rules.Counted without a closure: a step of the run that was
// stored already (inserted[i] false) does not count.
func counted(u *store.RunUpdateParams, steps []*steptype.Step, inserted []bool) *store.RunUpdateParams {
	if u.StepDelta <= 0 {
		return u
	}
	dups := int64(0)
	for i, s := range steps {
		if s.RunID == u.ID && !inserted[i] {
			dups++
		}
	}
	if dups == 0 {
		return u
	}
	c := *u
	c.StepDelta = max(u.StepDelta-dups, 0)
	return &c
}

// stepAppend applies an append under the shared lock and the locks of the
// sessions it touches (shared) or under the exclusive lock. It returns the
// stored steps, not copies.
func (m *Store) stepAppend(p *store.StepAppendParams, clones []*steptype.Step, shared bool) ([]*steptype.Step, error) {
	var locked []*sessionRow
	var lockBuf [2]*sessionRow
	if shared {
		if err := m.rlock(); err != nil {
			return nil, err
		}
		defer m.mu.RUnlock()
		var err error
		if locked, err = m.appendLocks(p, lockBuf[:0]); err != nil {
			return nil, err
		}
		defer unlockSessions(locked)
	} else {
		if err := m.lock(); err != nil {
			return nil, err
		}
		defer m.mu.Unlock()
	}
	now := rules.Now(time.Time{})

	// Staging: small appends (one session, one run) stay on the stack.
	var sessBuf [1]stagedSession
	var rowBuf [2]*stepRow
	var runBuf [1]stagedRun
	var insBuf [4]bool
	sessions, newRows, runs, inserted := sessBuf[:0], rowBuf[:0], runBuf[:0], insBuf[:0]
	out := clones // the stored steps, in place of the clones
	for i, in := range p.Steps {
		row := m.steps.get(in.ID)
		if row == nil {
			for _, n := range newRows {
				if n.id == in.ID {
					row = n
					break
				}
			}
		} else if !holds(locked, row.sessionID) {
			return nil, errEscalate // stored meanwhile by another session's append
		}
		inserted = append(inserted, row == nil)
		if row == nil {
			k := slices.IndexFunc(sessions, func(st stagedSession) bool { return st.sr.id == in.SessionID })
			if k < 0 {
				sr, err := m.session(in.SessionID)
				if err != nil {
					return nil, err
				}
				// A shallow copy: stored records are replaced, never
				// changed in place, so the new one may share the old one's
				// metadata.
				c := *sr.s
				sessions = append(sessions, stagedSession{sr, &c})
				k = len(sessions) - 1
			}
			sess := sessions[k].s
			if err := rules.CheckSequence(in, sess.LastSequence+1); err != nil {
				return nil, err
			}
			s := clones[i]
			s.Sequence = sess.LastSequence + 1
			if s.CreatedAt.IsZero() {
				s.CreatedAt = now
			}
			row = &stepRow{id: s.ID, sessionID: s.SessionID, runID: s.RunID, seq: s.Sequence,
				kind: s.Kind, status: s.Status, step: s}
			sess.LastSequence = s.Sequence
			sess.UpdatedAt = now
			rules.AddTotals(sess, s, 1)
			newRows = append(newRows, row)
		}
		out[i] = row.step
	}
	for _, u := range p.Runs {
		k := slices.IndexFunc(runs, func(st stagedRun) bool { return st.r.ID == u.ID })
		if k < 0 {
			cur := m.runs.get(u.ID)
			if cur == nil {
				return nil, rules.NotFound("run", u.ID)
			}
			c := *cur // shallow, as the session above
			runs = append(runs, stagedRun{cur: cur, r: &c})
			k = len(runs) - 1
		}
		if err := rules.UpdateRun(runs[k].r, counted(u, p.Steps, inserted), now); err != nil {
			return nil, err
		}
	}
	for i := range runs {
		st := &runs[i]
		if err := m.busy(st.r); err != nil {
			return nil, err
		}
		closed, err := m.closing(st.cur, st.r, locked)
		if err != nil {
			return nil, err
		}
		if closed != nil || rules.Finishing(st.cur, st.r) {
			for _, row := range newRows {
				if row.runID == st.r.ID && row.status == steptype.StepWaiting {
					closed = append(closed, row)
				}
			}
		}
		st.closed = closed
	}

	// Commit: the ids first, the only step that can still fail (another
	// session's append took one of them meanwhile).
	for i, row := range newRows {
		if !m.steps.add(row.id, row) {
			for _, r := range newRows[:i] {
				m.steps.del(r.id, r)
			}
			return nil, errEscalate
		}
	}
	for _, row := range newRows {
		sr := m.sessions[row.sessionID]
		sr.steps = append(sr.steps, row)
		m.waits.track(row)
	}
	for _, st := range sessions {
		st.sr.s = st.s
	}
	for _, st := range runs {
		m.putRun(st.r, st.closed)
	}
	return out, nil
}
