package memory

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// ErrClosed is returned by every method of a closed Store.
var ErrClosed = rules.ErrClosed

// Store is an in-memory store.Store. The zero value is not usable; call New.
//
// Locking: mu is held exclusively by whatever reads or writes across
// sessions (lists, claims, imports, forks, deletes, observations); the
// per-step paths (append, run update, reads of one session or one id) hold
// it shared and lock only the sessions they touch (sessionRow.mu, taken in
// id order), so runs of different sessions do not serialise on one mutex.
// The id indexes (steps, runs) are sharded maps with their own locks; an
// entry's session never changes, so a reader finds the session by id and
// then reads the entry again under that session's lock. Everything a
// session owns (its record, its steps and their status, its runs) is
// written only under its lock or under the exclusive lock. A stored run is
// replaced by every write except an append's own update of it, which
// changes the fields a step moves (cursor, state, step count, activity) in
// place (see stepOnly): whoever reads those fields, or copies a run for a
// caller, holds its session's lock.
type Store struct {
	mu       sync.RWMutex
	closed   bool                   // written under the exclusive lock
	sessions map[string]*sessionRow // written under the exclusive lock
	steps    *stepIndex             // by step id, and by run (runsteps.go)
	runs     *index[*steptype.Run]  // by run id
	waits    waitIndex              // waiting steps by run (exclusive.go)
	extras   extras                 // what rows keep outside themselves (row.go)
	vec      map[string]*space      // vector spaces by embedder, guarded by mu (vector.go)
	obsOnce  sync.Once
	obsd     *obsData // observation rows (observe.go)
	// cps are the context checkpoints by session and sequence
	// (checkpoint.go), guarded by cpsMu under the shared lock, or by the
	// exclusive lock; nil until the first is saved.
	cpsMu sync.Mutex
	cps   map[string]map[int64]*store.ContextCheckpoint
	// tasks are the worker tasks (task.go), nil until first used.
	tasksOnce sync.Once
	tasks     *taskTable
}

// sessionRow is a session and its own steps: steps[i] has sequence
// ForkSequence+1+i.
type sessionRow struct {
	id     string
	parent string     // s.ParentSessionID, readable without mu
	mu     sync.Mutex // see Store
	// s is the session's record: replaced (truncate, detach) or, by an
	// append, changed in place in its sequence, activity and totals; a
	// reader of those holds mu (or the exclusive lock).
	s *steptype.Session
	// steps are the session's own rows. A row's step is replaced, never
	// changed in place, so a snapshot of it can be cloned after unlocking.
	steps []*stepRow
	// open are the session's runs that are not terminal: the busy and
	// truncate checks look only here.
	open map[string]*steptype.Run
	// pre are a fork's own copies of its inherited steps 1..len(pre),
	// imported to materialise it and read only once SessionDetach cut its
	// lineage (import.go).
	pre []*stepRow
	// arena holds the rows of steps and pre, and their packed bytes.
	arena arena
}

func newSessionRow(s *steptype.Session) *sessionRow {
	return &sessionRow{id: s.ID, parent: s.ParentSessionID, s: s, open: map[string]*steptype.Run{}}
}

// The whole driver contract.
var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		sessions: make(map[string]*sessionRow),
		steps:    newStepIndex(),
		runs:     newIndex[*steptype.Run](),
		waits:    waitIndex{m: map[string]map[*stepRow]struct{}{}},
	}
}

// rlock takes the shared lock, or fails when the store is closed.
func (m *Store) rlock() error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// lock takes the exclusive lock, or fails when the store is closed.
func (m *Store) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Close marks the store closed; later calls fail with ErrClosed. Close is
// idempotent.
func (m *Store) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *Store) session(id string) (*sessionRow, error) {
	if id == "" {
		return nil, rules.Invalid("session id is required")
	}
	sr, ok := m.sessions[id]
	if !ok {
		return nil, rules.NotFound("session", id)
	}
	return sr, nil
}

// lineage returns the rows of sr's lineage, sr first: what reads that
// follow forks lock. The caller holds the shared lock.
func (m *Store) lineage(sr *sessionRow) []*sessionRow {
	rows := []*sessionRow{sr}
	for sr.parent != "" {
		sr = m.sessions[sr.parent]
		if sr == nil {
			break
		}
		rows = append(rows, sr)
	}
	return rows
}

// chain returns the lineage of sr, from sr up to its root.
func (m *Store) chain(sr *sessionRow) []rules.Link {
	var links []rules.Link
	for sr != nil {
		s := sr.s
		links = append(links, rules.Link{
			SessionID: s.ID, ParentSessionID: s.ParentSessionID,
			ForkSequence: s.ForkSequence, LastSequence: s.LastSequence,
		})
		sr = m.sessions[s.ParentSessionID]
	}
	return links
}

// visible returns the rows visible in sr with sequences [start, end], in
// sequence order.
func (m *Store) visible(sr *sessionRow, start, end int64) []*stepRow {
	var rows []*stepRow
	for _, seg := range rules.Segments(m.chain(sr), start, end) {
		own := m.sessions[seg.SessionID]
		base := own.s.ForkSequence + 1
		// An imported session may not hold all its steps yet.
		to := min(seg.To-base+1, int64(len(own.steps)))
		if from := seg.From - base; from < to {
			rows = append(rows, own.steps[from:to]...)
		}
	}
	return rows
}

// hasForks reports the fork sequences of the direct forks of id.
func (m *Store) forksOf(id string) []int64 {
	var seqs []int64
	for _, sr := range m.sessions {
		if sr.s.ParentSessionID == id {
			seqs = append(seqs, sr.s.ForkSequence)
		}
	}
	return seqs
}

// SessionCreate implements store.Store.
func (m *Store) SessionCreate(_ context.Context, p *store.SessionCreateParams) (*steptype.Session, error) {
	s, err := rules.NewSession(p)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if err := m.addSessionLocked(s); err != nil {
		return nil, err
	}
	return rules.CloneSession(s), nil
}

// addSessionLocked stores a new session, under the exclusive lock.
func (m *Store) addSessionLocked(s *steptype.Session) error {
	if _, ok := m.sessions[s.ID]; ok {
		return rules.Conflict("session %q already exists", s.ID)
	}
	m.sessions[s.ID] = newSessionRow(s)
	return nil
}

// SessionGet implements store.Store.
func (m *Store) SessionGet(_ context.Context, p *store.SessionGetParams) (*steptype.Session, error) {
	if err := m.rlock(); err != nil {
		return nil, err
	}
	sr, err := m.session(p.ID)
	if err != nil {
		m.mu.RUnlock()
		return nil, err
	}
	// A copy under the lock: an append changes the record in place. Its
	// metadata is replaced, never changed in place: cloned after.
	sr.mu.Lock()
	s := *sr.s
	sr.mu.Unlock()
	m.mu.RUnlock()
	return rules.CloneSession(&s), nil
}

// SessionList implements store.Store.
func (m *Store) SessionList(_ context.Context, p *store.SessionListParams) (*store.SessionPage, error) {
	limit, cur, err := rules.CheckSessionList(p)
	if err != nil {
		return nil, err
	}
	terms, err := rules.MetadataFilter(p)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var all []*steptype.Session
	for _, sr := range m.sessions {
		s := sr.s
		if (p.Agent != "" && s.Agent != p.Agent) || (p.ParentID != "" && s.ParentSessionID != p.ParentID) ||
			!rules.MatchQuery(p.Query, s.ID, s.Title, s.Agent) || !cur.After(s.UpdatedAt, s.ID) || !rules.MatchMetadata(s.Metadata, terms) {
			continue
		}
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *steptype.Session) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	page := &store.SessionPage{}
	for i, s := range all {
		if i == limit {
			last := page.Sessions[limit-1]
			page.Next = rules.EncodeCursor(rules.SessionCursor{UpdatedAt: last.UpdatedAt, ID: last.ID})
			break
		}
		page.Sessions = append(page.Sessions, rules.CloneSession(s))
	}
	return page, nil
}

// SessionFork implements store.Store.
func (m *Store) SessionFork(_ context.Context, p *store.SessionForkParams) (*steptype.Session, error) {
	if err := rules.CheckFork(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	parent, err := m.session(p.ParentID)
	if err != nil {
		return nil, err
	}
	if _, ok := m.sessions[p.ID]; ok {
		return nil, rules.Conflict("session %q already exists", p.ID)
	}
	f, err := rules.NewFork(p, parent.s)
	if err != nil {
		return nil, err
	}
	m.sessions[f.ID] = newSessionRow(f)
	return rules.CloneSession(f), nil
}

// SessionDelete implements store.Store.
func (m *Store) SessionDelete(_ context.Context, p *store.SessionDeleteParams) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.ID)
	if err != nil {
		return err
	}
	if forks := m.forksOf(p.ID); len(forks) > 0 {
		return rules.Conflict("session %q has %d fork(s)", p.ID, len(forks))
	}
	for _, r := range sr.steps {
		m.steps.del(r.id(), r)
		m.waits.untrack(r)
		m.extras.drop(r)
	}
	for _, r := range sr.pre {
		m.extras.drop(r)
	}
	var runs []string
	m.runs.each(func(id string, r *steptype.Run) bool {
		if r.SessionID == p.ID {
			runs = append(runs, id)
		}
		return true
	})
	for _, id := range runs {
		m.runs.del(id, m.runs.get(id))
	}
	delete(m.sessions, p.ID)
	delete(m.cps, p.ID)
	return nil
}

// SessionUpdate implements store.Store.
func (m *Store) SessionUpdate(_ context.Context, p *store.SessionUpdateParams) (*steptype.Session, error) {
	if err := rules.CheckSessionUpdate(p); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.ID)
	if err != nil {
		return nil, err
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	u, err := rules.UpdateSession(sr.s, p)
	if err != nil {
		return nil, err
	}
	sr.s.Metadata, sr.s.Title, sr.s.UpdatedAt = u.Metadata, u.Title, u.UpdatedAt
	return u, nil
}
