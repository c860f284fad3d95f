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
// outside the locks: the stored forms of the input before (pack), the
// caller's of the placed steps after, from snapshots taken under the locks
// (a stored step is replaced, never changed in place). With p.InPlace a
// new row is returned as the given step, placed, instead of a copy.
func (m *Store) StepAppend(_ context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	if err := rules.CheckAppend(p); err != nil {
		return nil, err
	}
	var rowBuf [4]*stepRow
	var xBuf [4]*rowExtra
	rows, xs := rowBuf[:0], xBuf[:0]
	for _, in := range p.Steps {
		row, x := newRow(in, m.arenaOf(in.SessionID))
		row.normalized()
		rows, xs = append(rows, row), append(xs, x)
	}
	var placedBuf [4]placedStep
	placed, err := m.stepAppend(p, rows, xs, placedBuf[:0], true)
	if err == errEscalate {
		placed, err = m.stepAppend(p, rows, xs, placedBuf[:0], false)
	}
	if err != nil {
		return nil, err
	}
	if p.InPlace && !slices.ContainsFunc(placed, func(pl placedStep) bool { return !pl.fresh }) {
		// New rows, handed over: the caller's steps get what was placed and
		// are returned, in the caller's slice; the store keeps its packed
		// copies.
		for i := range placed {
			rules.HandOver(p.Steps[i], placed[i].p.seq, placed[i].p.created.time())
		}
		return p.Steps, nil
	}
	out := make([]*steptype.Step, len(placed))
	for i := range placed {
		pl := &placed[i]
		if p.InPlace && pl.fresh {
			out[i] = rules.HandOver(p.Steps[i], pl.p.seq, pl.p.created.time())
			continue
		}
		out[i] = pl.p.step()
	}
	return out, nil
}

// placedStep is what an append placed for one of its steps: a snapshot of
// the stored row, and whether the row is the step's own new one.
type placedStep struct {
	p     packedStep
	fresh bool
}

// arenaOf returns the arena of a session, or nil when there is no such
// session (the append reports it). The arena stays usable after the
// session is deleted: what it hands out is then garbage.
func (m *Store) arenaOf(sessionID string) *arena {
	m.mu.RLock()
	sr := m.sessions[sessionID]
	m.mu.RUnlock()
	if sr == nil {
		return nil
	}
	return &sr.arena
}

// appendLocks locks, under the shared lock, the sessions an append
// touches: those of its steps and those of its runs. An unknown session or
// run escalates: the exclusive path reports it. A step stored already
// under its id in another session (a re-append with the wrong session,
// rare) escalates in stepAppend, which looks the ids up under these locks:
// looking each id up here as well cost every append a second visit of the
// step-id index.
func (m *Store) appendLocks(p *store.StepAppendParams, rows []*sessionRow) ([]*sessionRow, error) {
	for _, in := range p.Steps {
		sr := m.sessions[in.SessionID]
		if sr == nil {
			return nil, errEscalate
		}
		rows = append(rows, sr)
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

// stagedSession is a session's record as an append leaves it: a copy,
// written back field by field (see stepAppend).
type stagedSession struct {
	sr *sessionRow
	s  steptype.Session
}

// stagedRun is a run as an append leaves it: r is a copy of cur, changed
// by the update. A step's own update (stepOnly) is written back into cur
// field by field; any other replaces cur by a copy of r.
type stagedRun struct {
	cur      *steptype.Run
	r        steptype.Run
	stepOnly bool
	closed   []*stepRow
}

// stepOnly reports whether u changes a run only in the fields a step moves
// (its cursor, state, step count and activity time): the fields that every
// reader of a stored run reads under its session's lock or the exclusive
// lock. The others (status, lease, output, error, options) are read
// without the session's lock by RunClaim, so a run whose update changes
// them is replaced, never changed in place.
func stepOnly(u *store.RunUpdateParams) bool {
	return u.Status == nil && u.Output == nil && !u.ClearError && u.Error == nil && u.Options == nil &&
		u.LeaseExpires == nil && u.LeaseFor <= 0 && !u.ClearLease
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
// sessions it touches (shared) or under the exclusive lock. rows are the
// steps' own new rows, used for those not stored yet, and xs what they
// keep in the extras. It appends to out what was placed for each step.
func (m *Store) stepAppend(p *store.StepAppendParams, rows []*stepRow, xs []*rowExtra, out []placedStep, shared bool) ([]placedStep, error) {
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
	return m.appendLocked(p, rows, xs, out, locked)
}

// appendLocked is stepAppend under its locks (locked nil: the exclusive
// lock). It is a function of its own so that stepAppend's few returns
// keep its defers inlined (the compiler's open-coded defers: at most 15
// returns times defers), which the many returns here would not.
func (m *Store) appendLocked(p *store.StepAppendParams, rows []*stepRow, xs []*rowExtra, out []placedStep, locked []*sessionRow) ([]placedStep, error) {
	now := rules.Now(time.Time{})

	// Staging: small appends (one session, one run) stay on the stack.
	var sessBuf [1]stagedSession
	var rowBuf [2]*stepRow
	var xBuf [2]*rowExtra
	var runBuf [1]stagedRun
	var insBuf [4]bool
	sessions, newRows, newXs, runs, inserted := sessBuf[:0], rowBuf[:0], xBuf[:0], runBuf[:0], insBuf[:0]
	for i, in := range p.Steps {
		row := m.steps.get(in.ID)
		if row == nil {
			for _, n := range newRows {
				if n.id() == in.ID {
					row = n
					break
				}
			}
		} else if !holds(locked, row.sessionID()) {
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
				sessions = append(sessions, stagedSession{sr, *sr.s})
				k = len(sessions) - 1
			}
			sess := &sessions[k].s
			if err := rules.CheckSequence(in, sess.LastSequence+1); err != nil {
				return nil, err
			}
			row = rows[i]
			row.seq = sess.LastSequence + 1
			row.packedNums.seq = row.seq
			if in.CreatedAt.IsZero() {
				row.created = packTime(now)
			}
			sess.LastSequence = row.seq
			sess.UpdatedAt = now
			row.addTotals(sess, 1)
			newRows, newXs = append(newRows, row), append(newXs, xs[i])
		}
		if k := slices.Index(newRows, row); k >= 0 {
			out = append(out, placedStep{p: snapOf(row, newXs[k]), fresh: row == rows[i]})
		} else {
			out = append(out, placedStep{p: m.snap(row)})
		}
	}
	for _, u := range p.Runs {
		k := -1
		for j := range runs {
			if runs[j].r.ID == u.ID {
				k = j
				break
			}
		}
		if k < 0 {
			cur := m.runs.get(u.ID)
			if cur == nil {
				return nil, rules.NotFound("run", u.ID)
			}
			runs = append(runs, stagedRun{cur: cur, r: *cur, stepOnly: true}) // shallow, as the session above
			k = len(runs) - 1
		}
		runs[k].stepOnly = runs[k].stepOnly && stepOnly(u)
		if err := rules.UpdateRun(&runs[k].r, counted(u, p.Steps, inserted), now); err != nil {
			return nil, err
		}
	}
	for i := range runs {
		st := &runs[i]
		if err := m.busy(&st.r); err != nil {
			return nil, err
		}
		closed, err := m.closing(st.cur, &st.r, locked)
		if err != nil {
			return nil, err
		}
		if closed != nil || rules.Finishing(st.cur, &st.r) {
			for _, row := range newRows {
				if row.runID() == st.r.ID && row.waiting() {
					closed = append(closed, row)
				}
			}
		}
		st.closed = closed
	}

	// Commit: the ids first, the only step that can still fail (another
	// session's append took one of them meanwhile).
	for i, row := range newRows {
		if !m.steps.add(row.id(), row) {
			for _, r := range newRows[:i] {
				m.steps.del(r.id(), r)
			}
			return nil, errEscalate
		}
	}
	for i, row := range newRows {
		sr := m.sessions[row.sessionID()]
		sr.steps = appendDoubling(sr.steps, row)
		m.waits.track(row)
		m.extras.set(row, newXs[i])
	}
	// The session record is changed in place, in the fields an append
	// moves only: every reader of them holds the session's lock (SessionGet
	// copies the record under it), and the others (its id, agent, parent)
	// are read without it.
	for i := range sessions {
		st, cur := &sessions[i].s, sessions[i].sr.s
		cur.LastSequence, cur.UpdatedAt = st.LastSequence, st.UpdatedAt
		cur.InputTokens, cur.OutputTokens, cur.Cost = st.InputTokens, st.OutputTokens, st.Cost
	}
	// A step's own run update is written into the stored record, in the
	// fields it moves only (see stepOnly); any other replaces the record.
	for i := range runs {
		st := &runs[i]
		if st.stepOnly && st.closed == nil {
			cur := st.cur
			cur.Cursor, cur.State, cur.StepCount, cur.UpdatedAt = st.r.Cursor, st.r.State, st.r.StepCount, st.r.UpdatedAt
			continue
		}
		r := new(steptype.Run)
		*r = st.r
		m.putRun(r, st.closed)
	}
	return out, nil
}
