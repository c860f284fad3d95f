package server

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// The agent views (overview and graph) read the steps of an agent's newest
// sessions on every call. A session's steps only grow at its end, except
// for a truncation (maybe followed by new steps at the same sequences), a
// delete, and a waiting step that is resolved in place. So the server keeps
// the steps it read per session (viewCache) and, on the next call, reads
// only from the last step it holds: that step must come back with the same
// id (a truncated and re-appended sequence gets a new one), and everything
// from the first waiting step it holds is read again. Nothing depends on
// invalidation messages: each call checks what it holds against what the
// store says at that moment, so every instance of a server can keep its own.

// DefaultViewCacheBytes is the default of Config.ViewCacheBytes.
const DefaultViewCacheBytes = 32 << 20

// viewCache holds, per session, steps read for the agent views, least
// recently used first out beyond its size (an estimate of the bytes held).
// Entries are never changed once stored: a newer read replaces its entry.
type viewCache struct {
	mu   sync.Mutex
	max  int64
	used int64
	lru  list.List // of *viewEntry, most recently used at the front
	byID map[string]*list.Element
	next uint64 // serial of the next entry stored
	// memos are answers computed from entries, by request; an answer is
	// reused only while every entry it was computed from is still the
	// one in use.
	memos map[string]*viewMemo
}

// maxViewMemos bounds the answers kept (one per agent view and query; a
// graph of 300 nodes is a few hundred KB).
const maxViewMemos = 16

// viewInput is one session's part of an answer: the entry its steps came
// from (by serial: entries are never changed, a change stores a new one)
// and the first sequence used.
type viewInput struct {
	serial uint64
	from   int64
}

// viewMemo is an answer and the inputs it was computed from.
type viewMemo struct {
	inputs    []viewInput
	truncated bool
	value     any
}

// viewEntry is the steps of one session from some sequence to the last one
// read, with gap-free sequences.
type viewEntry struct {
	id     string
	serial uint64
	// The session's identity beyond its id: a session deleted and created
	// again under the same id is another one.
	created time.Time
	parent  string
	forkSeq int64
	steps   []*steptype.Step
	derived []graph.Derived // of each step, for the graph
	waiting int64           // lowest sequence of a waiting step, 0 for none
	bytes   int64
}

func newViewCache(maxBytes int64) *viewCache {
	if maxBytes <= 0 {
		return nil
	}
	return &viewCache{max: maxBytes, byID: map[string]*list.Element{}, next: 1, memos: map[string]*viewMemo{}}
}

// get returns the entry of sess, or nil (dropping an entry of another
// session of the same id).
func (c *viewCache) get(sess *steptype.Session) *viewEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[sess.ID]
	if el == nil {
		return nil
	}
	e := el.Value.(*viewEntry)
	if !e.created.Equal(sess.CreatedAt) || e.parent != sess.ParentSessionID || e.forkSeq != sess.ForkSequence {
		c.remove(el)
		return nil
	}
	c.lru.MoveToFront(el)
	return e
}

// put stores steps (as read, in sequence order) as the entry of sess,
// unless they are not gap-free or larger than the whole cache, and returns
// its serial (0: not stored).
func (c *viewCache) put(sess *steptype.Session, steps []*steptype.Step, derived []graph.Derived) uint64 {
	e := &viewEntry{id: sess.ID, created: sess.CreatedAt, parent: sess.ParentSessionID, forkSeq: sess.ForkSequence, steps: steps, derived: derived}
	ok := len(steps) > 0
	for i, st := range steps {
		if st == nil || st.Sequence != steps[0].Sequence+int64(i) {
			ok = false
			break
		}
		if st.Status == steptype.StepWaiting && e.waiting == 0 {
			e.waiting = st.Sequence
		}
		e.bytes += stepBytes(st) + int64(unsafe.Sizeof(derived[i])+uintptr(derived[i].Size()))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[sess.ID]; el != nil {
		c.remove(el)
	}
	if !ok || e.bytes > c.max {
		return 0
	}
	e.serial = c.next
	c.next++
	c.byID[e.id] = c.lru.PushFront(e)
	c.used += e.bytes
	for c.used > c.max {
		c.remove(c.lru.Back())
	}
	return e.serial
}

// recall returns the answer remembered under key when it was computed from
// exactly these inputs (nil inputs: some session's steps are not held).
func (c *viewCache) recall(key string, in []viewInput, truncated bool) (any, bool) {
	if c == nil || in == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memos[key]
	if m == nil || m.truncated != truncated || !slices.Equal(m.inputs, in) {
		return nil, false
	}
	return m.value, true
}

// remember keeps v, computed from in, under key (v must not be changed).
func (c *viewCache) remember(key string, in []viewInput, truncated bool, v any) {
	if c == nil || in == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.memos[key]; !ok && len(c.memos) >= maxViewMemos {
		for k := range c.memos { // any one
			delete(c.memos, k)
			break
		}
	}
	c.memos[key] = &viewMemo{inputs: in, truncated: truncated, value: v}
}

// drop removes the entry of a session.
func (c *viewCache) drop(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[id]; el != nil {
		c.remove(el)
	}
}

func (c *viewCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*viewEntry)
	delete(c.byID, e.id)
	c.used -= e.bytes
}

// size returns the number of entries and the bytes they hold.
func (c *viewCache) size() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID), c.used
}

// stepBytes estimates the memory a step read as an outline holds.
func stepBytes(s *steptype.Step) int64 {
	n := int64(unsafe.Sizeof(*s)) + 16 +
		int64(len(s.ID)+len(s.SessionID)+len(s.RunID)+len(s.ParentID)+len(s.Kind)+len(s.Name)+len(s.Status)+len(s.Role)) +
		int64(len(s.Content)+len(s.Reasoning)+len(s.ToolCallID)+len(s.ToolName)+len(s.Inputs)+len(s.Outputs)+len(s.StatePatch)) +
		int64(len(s.Metrics.Model)+len(s.Metrics.Provider)+len(s.Replay)+len(s.Fingerprint)+len(s.Embedder)+4*len(s.Vector))
	for _, tc := range s.ToolCalls {
		n += int64(unsafe.Sizeof(tc)) + int64(len(tc.ID)+len(tc.Name)+len(tc.Arguments))
	}
	if e := s.Error; e != nil {
		n += int64(unsafe.Sizeof(*e)) + int64(len(e.Message)+len(e.Cause)+len(e.Class)+len(e.Code))
	}
	a := s.Annotations
	n += int64(len(a.State) + len(a.StateSummary) + len(a.Goal) + len(a.GoalSummary) + len(a.Action) + len(a.ActionSummary))
	if p := s.Progress; p != nil {
		n += int64(unsafe.Sizeof(*p)) + 8 + int64(len(p.Message))
	}
	if s.Metadata != nil {
		n += 256 // outlines have none; a rough share for other reads
	}
	return n
}

// stepLister is Store.StepList or Store.StepOutline.
type stepLister func(context.Context, *store.StepListParams) ([]*steptype.Step, error)

// sessionSteps returns what list returns for sess's steps from sequence
// from (≥ 1) to the end, and what the graph derives from each (nil without
// a cache), reading through the cache: only the steps from the last one
// held (or the first waiting one held) are read, when what is held checks
// out against them, or, when the session's last sequence is the last one
// held and none held is waiting, that last step alone by its id. The
// slices returned must not be changed.
func (s *Server) sessionSteps(ctx context.Context, list stepLister, sess *steptype.Session, from int64) ([]*steptype.Step, []graph.Derived, uint64, error) {
	p := &store.StepListParams{SessionID: sess.ID}
	if from > 1 {
		p.StartSeq = from
	}
	c := s.views
	if c == nil {
		steps, err := list(ctx, p)
		return steps, nil, 0, err
	}
	if e := c.get(sess); e != nil {
		first, last := e.steps[0].Sequence, e.steps[len(e.steps)-1].Sequence
		held := e.steps[len(e.steps)-1]
		// Nothing appended, nothing waiting: the last step held, looked up
		// by id, tells whether the session was truncated at or below it
		// (its own steps from there were deleted; a fork's inherited ones
		// cannot be).
		if first <= from && sess.LastSequence == last && e.waiting == 0 {
			st, err := s.eng.Store().StepGet(ctx, &store.StepGetParams{ID: held.ID})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, nil, 0, err
			}
			if err == nil && st.SessionID == held.SessionID && st.Sequence == held.Sequence {
				return e.steps[from-first:], e.derived[from-first:], e.serial, nil
			}
		}
		// A lower last sequence is a truncation: read everything again.
		if first <= from && from <= last && sess.LastSequence >= last {
			probe := last
			if e.waiting > 0 {
				probe = min(probe, e.waiting)
			}
			probe = max(probe, from)
			fresh, err := list(ctx, &store.StepListParams{SessionID: sess.ID, StartSeq: probe})
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					c.drop(sess.ID)
				}
				return nil, nil, 0, err
			}
			if held := e.steps[probe-first:]; len(fresh) == len(held) && sameSteps(held, fresh) && sameStatus(held, fresh) {
				// Nothing new, and the waiting steps still wait (the only
				// change a stored step can see is leaving that status):
				// what is held is current.
				return e.steps[from-first:], e.derived[from-first:], e.serial, nil
			}
			if sameSteps(e.steps[probe-first:], fresh) {
				steps := slices.Concat(e.steps[from-first:probe-first], fresh)
				derived := slices.Concat(e.derived[from-first:probe-first], derive(fresh))
				return steps, derived, c.put(sess, steps, derived), nil
			}
			// Truncated and written again (or not what was held): read
			// the whole window again.
		}
	}
	steps, err := list(ctx, p)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			c.drop(sess.ID)
		}
		return nil, nil, 0, err
	}
	derived := derive(steps)
	return steps, derived, c.put(sess, steps, derived), nil
}

// derive returns graph.Derive of each step (a zero value for nil).
func derive(steps []*steptype.Step) []graph.Derived {
	d := make([]graph.Derived, len(steps))
	for i, st := range steps {
		if st != nil {
			d[i] = graph.Derive(st)
		}
	}
	return d
}

// sameSteps reports whether fresh begins with the steps of held (same
// sequences, same ids), read again.
func sameSteps(held, fresh []*steptype.Step) bool {
	if len(fresh) < len(held) {
		return false
	}
	for i, h := range held {
		if f := fresh[i]; f == nil || f.Sequence != h.Sequence || f.ID != h.ID {
			return false
		}
	}
	return true
}

// sameStatus reports whether the steps of fresh have the statuses of held.
func sameStatus(held, fresh []*steptype.Step) bool {
	for i, h := range held {
		if fresh[i].Status != h.Status {
			return false
		}
	}
	return true
}
