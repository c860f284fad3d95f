package postgres

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// errNothingToCommit ends a group transaction, rolling it back, when every
// request in it failed its checks.
var errNothingToCommit = errors.New("stepwise: postgres: no append of the group passed its checks")

// appended is one result of StepAppend: a new row (pre at seq, with its
// body) or the body of the row that already held the id.
type appended struct {
	pre  *rules.PreEncoded
	seq  int64
	body []byte
}

// groupState is what a group transaction has locked and read, as the
// requests applied so far have changed it, and what it will write.
type groupState struct {
	sessions map[string]*steptype.Session // locked rows, as updated
	stored   map[string][]byte            // bodies of the step ids stored
	runs     map[string]*steptype.Run     // locked rows, as updated
	dbNow    int64                        // the database clock
	waiting  []waitingStep                // the waiting steps of the runs

	cols      stepColumns       // the steps to insert
	sessOrder []string          // sessions to write, first-touch order
	runOrder  []string          // runs to write, first-update order
	runErr    map[string][]byte // each run's error column
	closes    []closing         // waiting steps to close
	payloads  []string          // notifications, in order
	seen      map[string]bool   // payloads queued
	busy      string            // a session of the runs written
	sessTouch map[string]bool

	runSlab  []steptype.Run     // the requests' copies of runs (runCopy)
	sessSlab []steptype.Session // the requests' copies of sessions
	outSlab  []appended         // the requests' results (results)

	sessCols sessionColumns // the sessions' update (writes)
	runCols  runColumns     // the runs' update (runArgs)
	allArgs  [20]any        // groupWritesSQL's parameters (writes)

	// What the group locks or reads: sorted session ids, step ids,
	// sorted run ids (newGroupState).
	sessionIDs, stepIDs, runIDs []string
	lock                        lockParts // the lock batch (lockBatch)
}

// closing is the new row of a waiting step closed with its run.
type closing struct {
	id, status string
	body       []byte
}

// lockGroup locks the sessions and runs the requests write and reads the
// step ids they would insert, in one round trip (BEGIN in front): rows in
// id order, FOR NO KEY UPDATE, so concurrent groups and single writers,
// in any process, queue on them without deadlocking.
func lockGroup(ctx context.Context, tx *wtx, reqs []*appendReq) (*groupState, error) {
	g, sessionIDs, _, runIDs := newGroupState(reqs)
	if len(sessionIDs) == 0 && len(runIDs) == 0 {
		return g, nil
	}
	return g, tx.send(ctx, g.lockBatch(), false)
}

// grp prefixes the group's statements (lockBatch).
const grp = "/* group */ "

// The statements of lockBatch.
const (
	lockSessionsSQL = grp + `SELECT ` + sessionCols + ` FROM sessions WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`
	lockStepsSQL    = grp + `SELECT id, body FROM steps WHERE id = ANY($1)`
	lockRunsSQL     = grp + `SELECT ` + sqlrow.RunCols + ` FROM runs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`
	lockWaitingSQL  = grp + waitingSQL
	// lockSettingsSQL sets, for the rest of the transaction, what the
	// group's reads run under, in one statement (it was two SET LOCALs):
	// sequential scans off and generic plans, the plan_cache_mode it
	// replaces kept in stepwise.plan_cache_mode for lockClockSQL (the
	// nested call is the argument, so it runs first).
	// It also takes the metric hours' shared lock (migration 00080)
	// before the group's insert deletes the hours of its steps
	// (stepGroupInsertSQL).
	lockSettingsSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan',
		set_config('stepwise.plan_cache_mode', current_setting('plan_cache_mode'), true) IS NOT NULL),
		set_config('enable_seqscan', 'off', true), pg_advisory_xact_lock_shared(730510, hashtext(current_schema()))`
	// lockClockSQL reads the database clock and gives plan_cache_mode back
	// the value lockSettingsSQL replaced, so the writes plan as every other
	// statement does (the clock and SET LOCAL … TO DEFAULT were two
	// statements).
	lockClockSQL   = `SELECT ` + dbNowSQL + `, set_config('plan_cache_mode', current_setting('stepwise.plan_cache_mode'), true)`
	lockStatements = 5 // at most
)

// lockReadsSQL is lockStepsSQL and lockWaitingSQL in one statement, for a
// group that locked both sessions and runs: a row of the first is (false,
// id, body), of the second (true, run_id, body).
var lockReadsSQL = grp + `SELECT false, id, body FROM steps WHERE id = ANY($1)
	UNION ALL SELECT true, * FROM (` + shiftParams(waitingSQL, 1) + `) w`

// lockParts are the parts of a group's lock batch, g's own: the batch, its
// statements, their parameters (pointers to g's id slices) and callbacks,
// made with g and kept with it when it is released (groupPool), so that
// locking a group allocates none of them.
type lockParts struct {
	b    pgx.Batch
	qq   [lockStatements]pgx.QueuedQuery
	argv [4][1]any // sessions, steps, runs, waiting
	fns  struct{ sessions, steps, runs, now, waiting, reads func(pgx.BatchResults) error }
	both [2]any // lockReadsSQL's parameters: step ids, run ids
	now  [2]any // the destinations of the clock's row (the setting's is skipped)
}

// init makes g's lock parts: its callbacks read into g.
func (l *lockParts) init(g *groupState) {
	l.b.QueuedQueries = make([]*pgx.QueuedQuery, 0, lockStatements)
	l.argv = [4][1]any{{&g.sessionIDs}, {&g.stepIDs}, {&g.runIDs}, {&g.runIDs}}
	l.now = [2]any{&g.dbNow, nil}
	put := func(sess *steptype.Session) { g.sessions[sess.ID] = sess }
	l.fns.sessions = rowsFunc(func(rows pgx.Rows) error { return scanGroupSessions(rows, g.sessionIDs, put) })
	l.fns.steps = rowsFunc(func(rows pgx.Rows) error { return g.scanStored(rows, false) })
	l.fns.runs = rowsFunc(func(rows pgx.Rows) error {
		runs, err := scanGroupRuns(rows, g.runIDs, g.sessionIDs)
		for _, r := range runs {
			g.runs[r.ID] = r
		}
		return err
	})
	l.fns.now = func(br pgx.BatchResults) error { return br.QueryRow().Scan(l.now[:]...) }
	l.fns.waiting = rowsFunc(func(rows pgx.Rows) error { return collectWaiting(rows, &g.waiting) })
	l.both = [2]any{&g.stepIDs, &g.runIDs}
	l.fns.reads = rowsFunc(func(rows pgx.Rows) error { return g.scanStored(rows, true) })
}

// scanStored reads the rows of lockStepsSQL (id, body) into g.stored, or,
// flagged, those of lockReadsSQL (waiting, id, body): a waiting step's
// into g.waiting. Each scan of body makes a new slice (pgx copies bytea),
// so the map and the list keep their rows' own bytes.
func (g *groupState) scanStored(rows pgx.Rows, flagged bool) error {
	var waiting bool
	var id string
	var body []byte
	dst := [3]any{&waiting, &id, &body}
	scan := dst[1:]
	if flagged {
		scan = dst[:]
	}
	for rows.Next() {
		if err := rows.Scan(scan...); err != nil {
			return err
		}
		if waiting {
			g.waiting = append(g.waiting, waitingStep{runID: id, body: body})
		} else {
			g.stored[id] = body
		}
	}
	return rows.Err()
}

// rowsFunc is what pgx.QueuedQuery.Query makes of fn, made once.
func rowsFunc(fn func(pgx.Rows) error) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		rows, _ := br.Query()
		defer rows.Close()
		if err := fn(rows); err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
}

// queue adds a statement to the batch.
func (l *lockParts) queue(sql string, args []any, fn func(pgx.BatchResults) error) {
	q := &l.qq[len(l.b.QueuedQueries)]
	*q = pgx.QueuedQuery{SQL: sql, Arguments: args, Fn: fn}
	l.b.QueuedQueries = append(l.b.QueuedQueries, q)
}

// reset empties the batch (its statements keep nothing of the group).
func (l *lockParts) reset() {
	clear(l.qq[:len(l.b.QueuedQueries)])
	l.b.QueuedQueries = l.b.QueuedQueries[:0]
}

// lockBatch returns the statements that lock the group's sessions and runs
// and read what it needs under the locks, from g's own parts (lockParts).
func (g *groupState) lockBatch() *pgx.Batch {
	l := &g.lock
	// A group's reads, a group of one included, run on generic plans made
	// with sequential scans off, so they are the primary-key and
	// partial-index scans their = ANY($1) wants whatever the tables'
	// statistics: a generic plan chosen while a table was nearly empty (a
	// fresh schema, until autovacuum analyzes it) scanned the whole steps
	// table for every group (6.4 ms a call) and kept doing so until the
	// next ANALYZE, and planning each group's reads for its parameters
	// instead (force_custom_plan) cost an eighth of the server's CPU: the
	// selectivity of = ANY($1) is estimated element by element, each
	// reading (and decompressing) the column's statistics. A lone append
	// would plan its reads for its parameters too (the default
	// plan_cache_mode keeps custom plans for the steps and runs reads of one
	// id, which the planner costs below their generic plans): its four reads
	// cost the server ~190 µs per append on custom plans, ~110 µs on generic
	// plans with the three SET LOCALs (PostgreSQL 15). The statements have
	// texts of their own ("/* group */"), so the plans made under these
	// settings are never shared with the statements of other paths,
	// planned with the defaults.
	// Sequential scans stay off to the end of the transaction: the group's
	// multi-row updates then join their unnest(…) to sessions and runs by
	// primary key instead of scanning the tables (and, in a small busy
	// table, every dead version a HOT update left on its pages).
	l.queue(lockSettingsSQL, nil, nil)
	// The reads after the locks: they see every step committed by the
	// previous holder of a session or run.
	switch {
	case len(g.sessionIDs) > 0 && len(g.runIDs) > 0:
		l.queue(lockSessionsSQL, l.argv[0][:], l.fns.sessions)
		l.queue(lockRunsSQL, l.argv[2][:], l.fns.runs)
		l.queue(lockReadsSQL, l.both[:], l.fns.reads)
	case len(g.sessionIDs) > 0:
		l.queue(lockSessionsSQL, l.argv[0][:], l.fns.sessions)
		l.queue(lockStepsSQL, l.argv[1][:], l.fns.steps)
	case len(g.runIDs) > 0:
		l.queue(lockRunsSQL, l.argv[2][:], l.fns.runs)
		l.queue(lockWaitingSQL, l.argv[3][:], l.fns.waiting)
	}
	// The clock (now(): the transaction's, whatever statement reads it)
	// with the plan_cache_mode put back.
	l.queue(lockClockSQL, nil, l.fns.now)
	return &l.b
}

// newGroupState returns the state of a group of reqs, its maps and
// columns made at their size, and the sorted session ids, the step ids and
// the sorted run ids the group locks or reads.
func newGroupState(reqs []*appendReq) (g *groupState, sessionIDs, stepIDs, runIDs []string) {
	steps, runs := 0, 0
	for _, r := range reqs {
		steps, runs = steps+len(r.p.Steps), runs+len(r.p.Runs)
	}
	// A released group's maps, columns and slices serve again (release),
	// emptied; new ones are made at their size: growing them step by step
	// was a few per cent of the bench process.
	g, _ = groupPool.Get().(*groupState)
	if g == nil {
		g = &groupState{sessions: make(map[string]*steptype.Session, steps), stored: make(map[string][]byte, steps),
			runs: make(map[string]*steptype.Run, runs), runErr: make(map[string][]byte, runs),
			seen: make(map[string]bool, steps+runs), sessTouch: make(map[string]bool, steps)}
		g.lock.init(g)
	}
	sessionIDs, stepIDs, runIDs = slices.Grow(g.sessionIDs, steps), slices.Grow(g.stepIDs, steps), slices.Grow(g.runIDs, runs)
	for _, r := range reqs {
		for _, st := range r.p.Steps {
			sessionIDs, stepIDs = append(sessionIDs, st.SessionID), append(stepIDs, st.ID)
		}
		for _, u := range r.p.Runs {
			runIDs = append(runIDs, u.ID)
		}
	}
	slices.Sort(sessionIDs)
	sessionIDs = slices.Compact(sessionIDs)
	slices.Sort(runIDs)
	runIDs = slices.Compact(runIDs)
	g.sessionIDs, g.stepIDs, g.runIDs = sessionIDs, stepIDs, runIDs
	g.cols.grow(len(stepIDs))
	g.runSlab, g.sessSlab = slab(g.runSlab, runs), slab(g.sessSlab, steps)
	g.outSlab = make([]appended, 0, steps)
	return g, sessionIDs, stepIDs, runIDs
}

// groupPool holds released group states, their maps and columns empty.
var groupPool sync.Pool // of *groupState

// maxPooledGroup bounds the steps of a group whose state is kept.
const maxPooledGroup = 1024

// slab returns s emptied when it has room for n elements, else a new one
// for n.
func slab[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:0]
	}
	return make([]T, 0, n)
}

// release empties g and gives it back for a later group: its maps and
// columns (a group's dozen maps and slices were made for every group), and
// the slabs of its copies of runs and sessions, which only g referred to.
// The group's transaction is over: its statements were sent, its callbacks
// ran. The results' slab is not kept: the requests read their results
// after.
func (g *groupState) release() {
	if len(g.stored) > maxPooledGroup {
		// A map's clear costs its capacity: a rare huge group's maps
		// would slow every group after it.
		return
	}
	clear(g.sessions)
	clear(g.stored)
	clear(g.runs)
	clear(g.runErr)
	clear(g.seen)
	clear(g.sessTouch)
	g.cols.reset()
	g.waiting, g.sessOrder, g.runOrder = emptied(g.waiting), emptied(g.sessOrder), emptied(g.runOrder)
	g.closes, g.payloads = emptied(g.closes), emptied(g.payloads)
	g.dbNow, g.busy = 0, ""
	g.sessCols.reset()
	g.runCols.reset()
	g.allArgs = [20]any{}
	g.lock.reset()
	g.sessionIDs, g.stepIDs, g.runIDs = emptied(g.sessionIDs), emptied(g.stepIDs), emptied(g.runIDs)
	g.runSlab, g.sessSlab, g.outSlab = emptied(g.runSlab), emptied(g.sessSlab), nil
	groupPool.Put(g)
}

// emptied returns s emptied, its elements zeroed so that it keeps nothing
// alive.
func emptied[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// apply runs the checks of one request on the rows as the requests before
// it left them and, when they pass, adds its writes to the group. A
// request that fails changes nothing: it works on copies of the rows.
func (g *groupState) apply(r *appendReq) ([]appended, error) {
	var sessions []*steptype.Session // this request's copies, first-touch order
	var stored map[string][]byte     // ids this request inserts, when it has many steps
	out := g.results(len(r.pre))
	for _, pe := range r.pre {
		in := pe.Step
		// A stored id (before this call, or earlier in it) is returned as
		// stored, whatever the new step asks for.
		if body, ok := insertedBody(out, stored, in.ID); ok {
			out = append(out, appended{body: body})
			continue
		}
		if body, ok := g.stored[in.ID]; ok {
			// A copy: the body may be one that an earlier append of the
			// group wrote into its own buffer (Sequenced), which that
			// append gives back once answered, maybe before this one
			// decodes it.
			out = append(out, appended{body: bytes.Clone(body)})
			continue
		}
		var sess *steptype.Session
		for _, s := range sessions {
			if s.ID == in.SessionID {
				sess = s
			}
		}
		if sess == nil {
			base := g.sessions[in.SessionID]
			if base == nil {
				return nil, rules.NotFound("session", in.SessionID)
			}
			sess = g.sessionCopy(base)
			sessions = append(sessions, sess)
		}
		seq := sess.LastSequence + 1
		if err := rules.CheckSequence(pe.In, seq); err != nil {
			return nil, err
		}
		// The body in pe's own buffer: it serves the group's insert and
		// this append's answer, both done before StepAppend releases pe.
		body, err := pe.Sequenced(seq)
		if err != nil {
			return nil, err
		}
		if len(r.pre) > manySteps {
			if stored == nil {
				stored = map[string][]byte{}
			}
			stored[in.ID] = body
		}
		sess.LastSequence, sess.UpdatedAt = seq, r.now
		rules.AddTotals(sess, in, 1)
		out = append(out, appended{pre: pe, seq: seq, body: body})
	}
	var runs, before []*steptype.Run // this request's copies, and the rows they were made from
	for _, u := range r.p.Runs {
		var run *steptype.Run
		for _, x := range runs {
			if x.ID == u.ID {
				run = x
			}
		}
		if run == nil {
			base := g.runs[u.ID]
			if base == nil {
				return nil, rules.NotFound("run", u.ID)
			}
			run = g.runCopy(base)
			runs, before = append(runs, run), append(before, base)
		}
		if err := rules.UpdateRun(run, rules.Counted(u, r.p.Steps, func(i int) bool { return out[i].pre != nil }), fromNanos(g.dbNow)); err != nil {
			return nil, err
		}
	}
	errs := make([][]byte, len(runs))
	var closes []closing
	var finished []string
	for k, run := range runs {
		var err error
		if errs[k], err = runErrorJSON(run.Error); err != nil {
			return nil, err
		}
		if rules.Finishing(before[k], run) {
			if closes, err = g.closing(closes, run); err != nil {
				return nil, err
			}
			finished = append(finished, run.ID)
		}
	}
	g.merge(out, sessions, runs, before, errs)
	g.closed(closes, finished)
	return out, nil
}

// results returns an empty slice for the n results of a request, from
// one slab per group made for the requests' steps (each request's results
// live as long as its answer; the slab until the last is read).
func (g *groupState) results(n int) []appended {
	if cap(g.outSlab)-len(g.outSlab) < n {
		return make([]appended, 0, n)
	}
	out := g.outSlab[len(g.outSlab) : len(g.outSlab) : len(g.outSlab)+n]
	g.outSlab = g.outSlab[:len(g.outSlab)+n]
	return out
}

// runCopy returns a copy of the group's row of a run, for a request to
// change. A shallow one: UpdateRun replaces the state, options and error
// of the run it updates, never writes into them, and the group's rows
// (decoded from the database, or a request's copies) are its own. The
// copies are taken from one slab per group, made for the requests' run
// updates.
func (g *groupState) runCopy(base *steptype.Run) *steptype.Run { return slabCopy(&g.runSlab, base) }

// sessionCopy is runCopy for a session row, from a slab made for the
// requests' steps.
func (g *groupState) sessionCopy(base *steptype.Session) *steptype.Session {
	return slabCopy(&g.sessSlab, base)
}

// slabCopy returns a shallow copy of base in the next free element of
// *slab, or allocated on its own when the slab is full (the slab never
// grows: its elements' addresses are handed out).
func slabCopy[T any](slab *[]T, base *T) *T {
	if len(*slab) == cap(*slab) {
		c := *base
		return &c
	}
	*slab = append(*slab, *base)
	return &(*slab)[len(*slab)-1]
}

// manySteps is the number of steps of an append from which its ids are
// looked up in a map rather than among the steps before.
const manySteps = 16

// insertedBody returns the body of the step id that the append inserted
// earlier (in out, or in stored when it has more than manySteps steps).
func insertedBody(out []appended, stored map[string][]byte, id string) ([]byte, bool) {
	if stored != nil {
		body, ok := stored[id]
		return body, ok
	}
	for _, a := range out {
		if a.pre != nil && a.pre.Step.ID == id {
			return a.body, true
		}
	}
	return nil, false
}

// closing adds to closes the closing of run's waiting steps, as stored
// before this request.
func (g *groupState) closing(closes []closing, run *steptype.Run) ([]closing, error) {
	for _, w := range g.waiting {
		if w.runID != run.ID {
			continue
		}
		st, err := rules.DecodeStep(w.body)
		if err != nil {
			return nil, err
		}
		rules.CloseWaiting(st, run)
		body, err := rules.EncodeStep(st)
		if err != nil {
			return nil, err
		}
		closes = append(closes, closing{id: st.ID, status: string(st.Status), body: body})
	}
	return closes, nil
}

// merge makes the changes of a request that passed its checks the group's.
func (g *groupState) merge(out []appended, sessions []*steptype.Session, runs, before []*steptype.Run, errs [][]byte) {
	for _, a := range out {
		if a.pre == nil {
			continue
		}
		st := a.pre.Step
		g.cols.add(st, a.seq, a.body)
		g.stored[st.ID] = a.body
		if st.Status == steptype.StepWaiting && g.runs[st.RunID] != nil {
			// A later request that finishes the run closes it.
			g.waiting = append(g.waiting, waitingStep{runID: st.RunID, body: a.body})
		}
	}
	for _, s := range sessions {
		if !g.sessTouch[s.ID] {
			g.sessTouch[s.ID] = true
			g.sessOrder = append(g.sessOrder, s.ID)
		}
		g.sessions[s.ID] = s
		g.notify(store.ChangeStep(s.ID, s.LastSequence))
	}
	for k, run := range runs {
		if _, ok := g.runErr[run.ID]; !ok {
			g.runOrder = append(g.runOrder, run.ID)
		}
		g.runs[run.ID], g.runErr[run.ID] = run, errs[k]
		var c changes
		if c.run(before[k].Status, run); len(c.payloads) > 0 {
			g.notify(c.payloads[0])
		}
		if g.busy == "" {
			g.busy = run.SessionID
		}
	}
}

// closed records the waiting steps a request closed, with their runs.
func (g *groupState) closed(closes []closing, finished []string) {
	if len(finished) == 0 {
		return
	}
	g.closes = append(g.closes, closes...)
	g.waiting = slices.DeleteFunc(g.waiting, func(w waitingStep) bool { return slices.Contains(finished, w.runID) })
	for _, c := range closes {
		if _, ok := g.stored[c.id]; ok {
			g.stored[c.id] = c.body
		}
	}
}

// notify queues a notification once.
func (g *groupState) notify(payload string) {
	if !g.seen[payload] {
		g.seen[payload] = true
		g.payloads = append(g.payloads, payload)
	}
}
