package sqlite

import (
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// maxCached bounds the rows rowCache keeps; past it the cache starts over.
const maxCached = 4096

// rowCache keeps the session and run rows the writer has read or written,
// so that a step append does not SELECT its session and run again. It is
// only a read-through copy: every change is executed on the database
// first, and evicting an entry is always safe. Entries put by a request
// that fails are evicted (its savepoint rolled back), and entries put during
// a batch that rolls back are evicted with it. The writer goroutine alone
// uses it.
type rowCache struct {
	sessions map[string]*steptype.Session
	runs     map[string]*steptype.Run
	// Keys put by the running request, and by the released requests of the
	// running batch.
	req, batch []cacheKey
}

type cacheKey struct {
	run bool
	id  string
}

func newRowCache() *rowCache {
	return &rowCache{sessions: make(map[string]*steptype.Session), runs: make(map[string]*steptype.Run)}
}

func (c *rowCache) session(id string) *steptype.Session {
	if s, ok := c.sessions[id]; ok {
		return rules.CloneSession(s)
	}
	return nil
}

// peekSession is the cached row itself, not to be changed (nil: none).
func (c *rowCache) peekSession(id string) *steptype.Session { return c.sessions[id] }

func (c *rowCache) putSession(s *steptype.Session) {
	c.sessions[s.ID] = rules.CloneSession(s)
	c.req = append(c.req, cacheKey{id: s.ID})
}

func (c *rowCache) run(id string) *steptype.Run {
	if r, ok := c.runs[id]; ok {
		return rules.CloneRun(r)
	}
	return nil
}

func (c *rowCache) putRun(r *steptype.Run) { c.keepRun(rules.CloneRun(r)) }

// peekRun returns the cached row itself, to be read only.
func (c *rowCache) peekRun(id string) *steptype.Run { return c.runs[id] }

// keepRun caches r itself: the caller hands it over and changes it no more.
func (c *rowCache) keepRun(r *steptype.Run) {
	c.runs[r.ID] = r
	c.req = append(c.req, cacheKey{run: true, id: r.ID})
}

// keepSession caches s itself: the caller hands it over and changes it no
// more.
func (c *rowCache) keepSession(s *steptype.Session) {
	c.sessions[s.ID] = s
	c.req = append(c.req, cacheKey{id: s.ID})
}

// dropSession evicts a session and its runs.
func (c *rowCache) dropSession(id string) {
	delete(c.sessions, id)
	for rid, r := range c.runs {
		if r.SessionID == id {
			delete(c.runs, rid)
		}
	}
}

func (c *rowCache) evict(keys []cacheKey) {
	for _, k := range keys {
		if k.run {
			delete(c.runs, k.id)
		} else {
			delete(c.sessions, k.id)
		}
	}
}

// released: the running request succeeded.
func (c *rowCache) released() {
	c.batch = append(c.batch, c.req...)
	c.req = c.req[:0]
}

// failed: the running request was rolled back.
func (c *rowCache) failed() {
	c.evict(c.req)
	c.req = c.req[:0]
}

// committed: the batch is durable; its entries stand.
func (c *rowCache) committed() {
	c.req, c.batch = c.req[:0], c.batch[:0]
	if len(c.sessions)+len(c.runs) > maxCached {
		clear(c.sessions)
		clear(c.runs)
	}
}

// aborted: the whole batch rolled back.
func (c *rowCache) aborted() {
	c.evict(c.req)
	c.evict(c.batch)
	c.req, c.batch = c.req[:0], c.batch[:0]
}
