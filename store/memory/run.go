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

// RunCreate implements store.Store.
func (m *Store) RunCreate(_ context.Context, p *store.RunCreateParams) (*steptype.Run, error) {
	r, err := rules.NewRun(p)
	if err != nil {
		return nil, err
	}
	if p.Session != nil {
		return m.runCreateWithSession(p, r)
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	sr, err := m.session(r.SessionID)
	if err != nil {
		return nil, err
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if m.runs.get(r.ID) != nil {
		return nil, rules.Conflict("run %q already exists", r.ID)
	}
	if err := m.busy(r); err != nil {
		return nil, err
	}
	if err := m.addRunLocked(r, p.LeaseFor); err != nil {
		return nil, err
	}
	return rules.CloneRun(r), nil
}

// addRunLocked stores a new run, leased for leaseFor from now when it has
// an owner; the caller holds the lock of the run's session (or the store's
// exclusive lock).
func (m *Store) addRunLocked(r *steptype.Run, leaseFor time.Duration) error {
	if r.LeaseOwner != "" && leaseFor > 0 {
		r.LeaseExpires = rules.Now(time.Time{}).Add(leaseFor)
	}
	if !m.runs.add(r.ID, r) {
		return rules.Conflict("run %q already exists", r.ID)
	}
	m.setRun(r)
	return nil
}

// runCreateWithSession is RunCreate with RunCreateParams.Session, under
// the exclusive lock: the session and the run appear together.
func (m *Store) runCreateWithSession(p *store.RunCreateParams, r *steptype.Run) (*steptype.Run, error) {
	s, err := rules.NewSession(p.Session)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if m.runs.get(r.ID) != nil {
		return nil, rules.Conflict("run %q already exists", r.ID)
	}
	if err := m.addSessionLocked(s); err != nil {
		return nil, err
	}
	if err := m.addRunLocked(r, p.LeaseFor); err != nil {
		delete(m.sessions, s.ID)
		return nil, err
	}
	return rules.CloneRun(r), nil
}

// RunGet implements store.Store.
func (m *Store) RunGet(_ context.Context, p *store.RunGetParams) (*steptype.Run, error) {
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("run id is required")
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	r := m.runs.get(p.ID)
	if r == nil {
		m.mu.RUnlock()
		return nil, rules.NotFound("run", p.ID)
	}
	// Copied under the session's lock: an append changes a step's fields
	// of the stored run in place.
	sr := m.sessions[r.SessionID]
	sr.mu.Lock()
	c := rules.CloneRun(m.runs.get(p.ID))
	sr.mu.Unlock()
	m.mu.RUnlock()
	return c, nil
}

// newestFirst orders runs by creation time, then id, descending.
func newestFirst(a, b *steptype.Run) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// RunList implements store.Store.
func (m *Store) RunList(_ context.Context, p *store.RunListParams) ([]*steptype.Run, error) {
	if err := rules.CheckRunList(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := []*steptype.Run{}
	m.runs.each(func(_ string, r *steptype.Run) bool {
		if (p.SessionID != "" && r.SessionID != p.SessionID) || (p.ParentRunID != "" && r.ParentRunID != p.ParentRunID) ||
			(p.Agent != "" && r.Agent != p.Agent) || (len(p.Statuses) > 0 && !slices.Contains(p.Statuses, r.Status)) {
			return true
		}
		out = append(out, r)
		return true
	})
	slices.SortFunc(out, newestFirst)
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	for i, r := range out {
		out[i] = rules.CloneRun(r)
	}
	return out, nil
}

// RunClaim implements store.Store: the oldest claimable runs first. It
// holds the shared lock: candidates are read from the index shard by
// shard, then each is claimed under its session's lock after checking it
// again, so a run is claimed once and writers elsewhere do not wait.
func (m *Store) RunClaim(_ context.Context, p *store.RunClaimParams) ([]*steptype.Run, error) {
	limit, now, err := rules.CheckClaim(p)
	if err != nil {
		return nil, err
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	var cands []*steptype.Run
	if p.ID != "" {
		r := m.runs.get(p.ID)
		if r == nil {
			return nil, rules.NotFound("run", p.ID)
		}
		cands = append(cands, r)
	} else {
		for i := range m.runs.shards {
			sh := &m.runs.shards[i]
			sh.mu.Lock()
			for _, r := range sh.m {
				if rules.Claimable(r, p, now) {
					cands = append(cands, r)
				}
			}
			sh.mu.Unlock()
		}
		slices.SortFunc(cands, func(a, b *steptype.Run) int {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
		})
	}
	out := []*steptype.Run{}
	for _, r := range cands {
		if len(out) == limit {
			break
		}
		sr := m.sessions[r.SessionID]
		sr.mu.Lock()
		cur := m.runs.get(r.ID)
		if rules.Claimable(cur, p, now) {
			c := rules.CloneRun(cur)
			rules.Claim(c, p, now)
			m.setRun(c)
			out = append(out, rules.CloneRun(c)) // under the lock: see RunGet
		}
		sr.mu.Unlock()
	}
	return out, nil
}

// RunUpdate implements store.Store.
func (m *Store) RunUpdate(_ context.Context, p *store.RunUpdateParams) (*steptype.Run, error) {
	if err := rules.CheckRunUpdate(p); err != nil {
		return nil, err
	}
	r, err := m.runUpdate(p, true)
	if err == errEscalate {
		r, err = m.runUpdate(p, false)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// runUpdate applies p under the shared lock and the run's session lock
// (shared) or under the exclusive lock. It returns the caller's copy of the
// stored run, made under the lock (an append changes a stored run's step
// fields in place).
func (m *Store) runUpdate(p *store.RunUpdateParams, shared bool) (*steptype.Run, error) {
	var locked []*sessionRow
	if shared {
		if err := m.rlock(); err != nil {
			return nil, err
		}
		defer m.mu.RUnlock()
		cur := m.runs.get(p.ID)
		if cur == nil {
			return nil, rules.NotFound("run", p.ID)
		}
		locked = []*sessionRow{m.sessions[cur.SessionID]}
		locked[0].mu.Lock()
		defer locked[0].mu.Unlock()
	} else {
		if err := m.lock(); err != nil {
			return nil, err
		}
		defer m.mu.Unlock()
	}
	cur := m.runs.get(p.ID)
	if cur == nil {
		return nil, rules.NotFound("run", p.ID)
	}
	c := *cur // shallow: RunUpdate replaces the stored run
	r := &c
	if err := rules.UpdateRun(r, p, rules.Now(time.Time{})); err != nil {
		return nil, err
	}
	if err := m.busy(r); err != nil {
		return nil, err
	}
	closed, err := m.closing(cur, r, locked)
	if err != nil {
		return nil, err
	}
	m.putRun(r, closed)
	return rules.CloneRun(r), nil
}
