package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// maxGroup bounds how many appends one group commit carries.
const maxGroup = 256

// maxInFlight bounds the group transactions of a Store in flight at once.
// Two, so that the server works on one group while the other waits for
// its commit's WAL flush or a round trip: with one, the server's share of
// every step ran on one backend at a time, and 100 concurrent runs made
// 30–60 % fewer steps per second (groups of ~50 instead of ~28).
const maxInFlight = 2

// appendReq is one StepAppend call, alone or in a group.
type appendReq struct {
	ctx context.Context
	p   *store.StepAppendParams
	pre []*rules.PreEncoded
	now time.Time

	out []appended // the result, once answered
	err error
	// wake receives exactly one message while the request is queued: nil
	// when it has been answered, or the group it must now lead (itself
	// first).
	wake chan []*appendReq
}

// reqPool holds answered requests, with their pre-encoded steps' slice.
var reqPool sync.Pool // of *appendReq

// newAppendReq returns the request of a StepAppend call (a released one
// when there is one), its pre-encoded steps to fill.
func newAppendReq(ctx context.Context, p *store.StepAppendParams, now time.Time) *appendReq {
	r, _ := reqPool.Get().(*appendReq)
	if r == nil {
		r = new(appendReq)
	}
	r.ctx, r.p, r.now = ctx, p, now
	if cap(r.pre) >= len(p.Steps) {
		r.pre = r.pre[:len(p.Steps)]
	} else {
		r.pre = make([]*rules.PreEncoded, len(p.Steps))
	}
	return r
}

// maxPooledPre bounds the pre-encoded slices kept with pooled requests.
const maxPooledPre = 64

// release empties r and gives it back for a later StepAppend. Only its
// caller does, once answered: no group holds r any more (a leader sends
// each request of its group one message and reads nothing of it after),
// and the results (a group's slab) were read.
func (r *appendReq) release() {
	clear(r.pre)
	pre := r.pre[:0]
	if cap(pre) > maxPooledPre {
		pre = nil
	}
	*r = appendReq{pre: pre}
	reqPool.Put(r)
}

// committer groups the appends of a Store. At most maxInFlight group
// transactions are in flight; appends that arrive meanwhile queue, and
// when one ends the whole queue becomes the next group, led by its first
// caller on its own goroutine. An append that finds a free slot leads a
// group of one at once: no hand-off and no extra goroutine when nothing
// contends. Groups in flight together lock their rows in the same order
// (sessions, then runs, each in id order), so they queue on a shared row
// instead of deadlocking.
type committer struct {
	mu       sync.Mutex
	inFlight int
	queue    []*appendReq

	commits atomic.Int64 // group transactions that committed appends
	appends atomic.Int64 // appends they committed
}

// GroupCommitStats reports how many transactions committed StepAppend
// calls and how many calls they committed: under concurrency a
// transaction carries several appends (appends > commits).
func (s *Store) GroupCommitStats() (commits, appends int64) {
	return s.group.commits.Load(), s.group.appends.Load()
}

// appendGrouped runs req, alone or in a group, and returns when it has
// been answered.
func (s *Store) appendGrouped(req *appendReq) {
	c := &s.group
	c.mu.Lock()
	if c.inFlight < maxInFlight {
		c.inFlight++
		c.mu.Unlock()
		s.lead([]*appendReq{req})
		return
	}
	req.wake = newWake()
	c.queue = append(c.queue, req)
	c.mu.Unlock()
	// Once queued the request is always answered, whatever its ctx does:
	// a leader may be handing it the next group.
	if group := req.wait(); group != nil {
		s.lead(group)
	}
}

// wakePool holds the wake channels of answered requests: a queued append
// (most of them, under concurrency) made a channel each.
var wakePool = sync.Pool{New: func() any { return make(chan []*appendReq, 1) }}

// newWake returns an empty wake channel.
func newWake() chan []*appendReq { return wakePool.Get().(chan []*appendReq) }

// wait returns the one message req.wake receives, and gives the channel,
// empty again and sent to by nobody else, back to wakePool.
func (req *appendReq) wait() []*appendReq {
	group := <-req.wake
	wakePool.Put(req.wake)
	req.wake = nil
	return group
}

// lead commits group (whose first request is the caller's), passes the
// lead to the first queued request with everything queued meanwhile, and
// answers the others of group.
func (s *Store) lead(group []*appendReq) {
	s.commitGroup(group)
	c := &s.group
	c.mu.Lock()
	var next []*appendReq
	if n := min(len(c.queue), maxGroup); n > 0 {
		next = append(make([]*appendReq, 0, n), c.queue[:n]...)
		c.queue = append(c.queue[:0], c.queue[n:]...)
	} else {
		c.inFlight--
	}
	c.mu.Unlock()
	if next != nil {
		next[0].wake <- next
	}
	for _, r := range group[1:] {
		r.wake <- nil
	}
}

// commitGroup runs the requests of group whose ctx has not ended in one
// transaction and sets every request's result. A request whose checks fail
// (a lost lease, an unexpected status or sequence, a missing row) fails
// alone and writes nothing. When the database refuses the group's writes
// (a constraint the checks cannot see, such as the one-unfinished-run
// index), nothing was written and each half of the group runs again, down
// to the culprit alone, which is the only one to fail.
func (s *Store) commitGroup(group []*appendReq) {
	live := make([]*appendReq, 0, len(group))
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, stop := groupContext(live)
	defer stop()
	ch := s.changesChannel()
	refused := false // the last attempt failed on the server: nothing was written
	_, err := inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		err := appendGroupTx(ctx, tx, live, ch)
		refused = err != nil && (pgError(err) != nil || errors.Is(err, errRaced))
		return struct{}{}, err
	})
	switch {
	case err == nil:
		s.group.commits.Add(1)
		for _, r := range live {
			if r.err == nil {
				s.group.appends.Add(1)
			}
		}
	case errors.Is(err, errNothingToCommit):
		// Every request failed its checks and has its error.
	case len(live) > 1 && refused:
		// Halves, recursively: a lone culprit costs about 2·log2(n)
		// transactions, and fails alone.
		h := len(live) / 2
		s.commitGroup(live[:h])
		s.commitGroup(live[h:])
	default:
		for _, r := range live {
			r.out, r.err = nil, err
		}
	}
}

// groupContext returns a context that ends when the contexts of all the
// requests have ended: a group is abandoned only when nobody waits for it.
// Its values are those of the first request's.
func groupContext(reqs []*appendReq) (context.Context, func()) {
	if len(reqs) == 1 {
		return reqs[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(reqs[0].ctx))
	w := &groupWatch{reqs: reqs, cancel: cancel}
	w.mu.Lock()
	w.watch()
	w.mu.Unlock()
	return ctx, w.stop
}

// groupWatch watches the contexts of a group's requests one at a time, in
// order: when the watched one ends it moves to the next that has not
// ended, and cancels the group past the last. An ended context stays
// ended, so the ones it skips (ended when it looked) need no watching: the
// group ends exactly when they all have, with one registration in flight
// (context.AfterFunc on every request's context, before, cost two
// allocations per append and a registration in each).
type groupWatch struct {
	mu      sync.Mutex
	reqs    []*appendReq
	next    int         // the first request not yet looked at
	unwatch func() bool // stops the registration in flight
	cancel  func()      // ends the group's context
	stopped bool        // the group is over: watch nothing more
}

// watch registers on the next request whose context has not ended, or
// cancels the group. w.mu is held.
func (w *groupWatch) watch() {
	for w.next < len(w.reqs) {
		ctx := w.reqs[w.next].ctx
		w.next++
		if ctx.Err() == nil {
			w.unwatch = context.AfterFunc(ctx, w.ended)
			return
		}
	}
	w.unwatch = nil
	w.cancel()
}

// ended runs when the watched context ends.
func (w *groupWatch) ended() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.watch()
	}
}

// stop ends the watching and the group's context.
func (w *groupWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.unwatch != nil {
		w.unwatch()
	}
	w.mu.Unlock()
	w.cancel()
}
