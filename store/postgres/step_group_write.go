package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// Multi-row forms of the writes of a group: one statement per table,
// whatever the number of appends; a group of one uses the single-row
// statements.
const (
	sessionTotalsManySQL = `UPDATE sessions AS s SET last_seq = u.last_seq, input_tokens = u.input_tokens,
		output_tokens = u.output_tokens, cost = u.cost, updated_at = u.updated_at
	FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::float8[], $6::bigint[])
		AS u(id, last_seq, input_tokens, output_tokens, cost, updated_at)
	WHERE s.id = u.id`
	runUpdateManySQL = `UPDATE runs AS r SET status = u.status, cursor = u.cursor, state = u.state, output = u.output,
		error = u.error, step_count = u.step_count, options = u.options, lease_owner = u.lease_owner,
		lease_expires = u.lease_expires, updated_at = u.updated_at, finished_at = u.finished_at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::bytea[], $7::bigint[], $8::bytea[],
		$9::text[], $10::bigint[], $11::bigint[], $12::bigint[])
		AS u(id, status, cursor, state, output, error, step_count, options, lease_owner, lease_expires, updated_at, finished_at)
	WHERE r.id = u.id`
	notifyManySQL   = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`
	closeWaitingSQL = `UPDATE steps SET status = $1, body = $2 WHERE id = $3 AND status = 'waiting'`
)

// stepGroupInsertSQL is stepInsertSQL with what an insert of steps keeps
// besides its rows (migration 00120, which dropped the insert trigger):
// the metric hours of the steps deleted (metric_hours_touch, migration
// 00080; the shared lock is lockSettingsSQL's) and the steps' minute
// rollup deltas appended (one row per minute, session and run, migration
// 00101), read from the insert's own parameters. The three tables are
// distinct, so the sub-statements' order does not matter.
const stepGroupInsertSQL = `WITH i AS (` + stepInsertSQL + `),
	h AS (DELETE FROM metric_hours WHERE hour = ANY (ARRAY(SELECT DISTINCT c - c % 3600000000000 FROM unnest($8::bigint[]) AS c)))
	INSERT INTO step_rollups_pending
	SELECT created - created % 60000000000, sid, run, count(*), count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
		sum(it), sum(ot), sum(cost)
	FROM unnest($8::bigint[], $2::text[], $4::text[], $5::text[], $6::text[], $12::bigint[], $13::bigint[], $15::float8[])
		AS p(created, sid, run, kind, status, it, ot, cost)
	GROUP BY 1, 2, 3`

// The session totals' fold (migration 00100) of the group's sessions whose
// steps above the watermark reach 256 with the group's: one session
// ($1 id, $2 its new last sequence) or many (arrays). It runs after the
// insert, whose steps it reads. A group's steps are above every
// watermark (a session's watermark is at most its last sequence), so the
// trigger's other case, steps inserted at or below it, is the import's
// alone (steps_inserted).
const (
	statsFoldSQL     = `SELECT steps_stats_fold(id, stats_through) FROM sessions WHERE id = $1 AND $2::bigint - stats_through >= 256`
	statsFoldManySQL = `SELECT steps_stats_fold(se.id, se.stats_through)
	FROM unnest($1::text[], $2::bigint[]) AS n(id, hi) JOIN sessions se ON se.id = n.id WHERE n.hi - se.stats_through >= 256`
)

// rollupFoldEvery is how many groups that insert steps append rollup
// deltas between two folds (step_rollups_fold, migration 00101), counted
// per process by rollupGroups.
const rollupFoldEvery = 64

const rollupFoldSQL = `SELECT step_rollups_fold()`

var rollupGroups atomic.Uint64

// groupWritesSQL is sessionTotalsManySQL, runUpdateManySQL and
// notifyManySQL in one statement (writesSQL): a group's writes of many
// sessions and runs were three statements besides its insert.
var groupWritesSQL = writesSQL(sessionTotalsManySQL, runUpdateManySQL)

// loneWritesSQL is groupWritesSQL for a group of one session and one run
// (a lone append, mostly): sessionTotalsSQL, runUpdateSQL and
// notifyManySQL in one statement.
var loneWritesSQL = writesSQL(sessionTotalsSQL, runUpdateSQL)

// writesSQL is the sessions' update sess (6 parameters), the runs' update
// runs (12) and the notifications (channel, payloads) in one statement,
// their parameters one after the other. The two updates change rows the
// other does not read (each sub-statement of a WITH sees the rows as they
// were before the statement), and their triggers fire at its end, as they
// would at the end of each.
func writesSQL(sess, runs string) string {
	return `WITH ss AS (` + sess + `),
	rr AS (` + shiftParams(runs, 6) + `)
	SELECT pg_notify($19, p) FROM unnest($20::text[]) AS p`
}

// shiftParams returns sql with each parameter $n written $(n+by).
func shiftParams(sql string, by int) string {
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		b.WriteByte(sql[i])
		j := i + 1
		for sql[i] == '$' && j < len(sql) && '0' <= sql[j] && sql[j] <= '9' {
			j++
		}
		if j > i+1 {
			n, _ := strconv.Atoi(sql[i+1 : j])
			b.WriteString(strconv.Itoa(n + by))
			i = j - 1
		}
	}
	return b.String()
}

// appendGroupTx runs the appends of reqs in tx, in two round trips: the
// first locks and reads what they touch; then each request's checks run,
// in order, on the rows as the requests before it left them (one that
// fails is left out, with its error); the second writes what the others
// did, with their notifications, and commits. Each request's result is
// set; the returned error is the transaction's.
func appendGroupTx(ctx context.Context, tx *wtx, reqs []*appendReq, channel string) error {
	for _, r := range reqs {
		r.out, r.err = nil, nil
	}
	g, err := lockGroup(ctx, tx, reqs)
	if g != nil {
		// Whatever happens: the statements are sent, or will not be.
		defer g.release()
	}
	if err != nil {
		return err
	}
	passed := 0
	for _, r := range reqs {
		if r.out, r.err = g.apply(r); r.err == nil {
			passed++
		}
	}
	if passed == 0 {
		return errNothingToCommit
	}
	b := g.writes(channel)
	if b.Len() == 0 {
		return nil
	}
	// Steps are inserted: the commit flushes the WAL (lazy task writes
	// wait for one, durable.go).
	tx.flushes = len(g.cols.ids) > 0
	if err := tx.send(ctx, b, true); err != nil {
		if pe := pgError(err); pe != nil && pe.Code == codeUniqueViolation && pe.ConstraintName == "steps_pkey" {
			// An id was inserted, in another session, after our read: a
			// new attempt returns it as stored.
			return errRaced
		}
		if len(reqs) == 1 && isBusy(err) {
			return rules.SessionBusy(g.busy)
		}
		return err
	}
	return nil
}

// writes returns the statements that write the group: the steps, the
// sessions' last_seq and totals, the runs, the waiting steps closed with
// their runs, and the notifications, which commit with them.
func (g *groupState) writes(channel string) *pgx.Batch {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 4+len(g.closes))} // grown once
	c := &g.cols
	if len(c.ids) > 0 {
		b.Queue(stepGroupInsertSQL, c.args()...)
		if len(g.sessOrder) == 1 {
			s := g.sessions[g.sessOrder[0]]
			b.Queue(statsFoldSQL, s.ID, s.LastSequence)
		} else if len(g.sessOrder) > 1 {
			sc := g.sessionArgs()
			b.Queue(statsFoldManySQL, sc[0], sc[1])
		}
		if rollupGroups.Add(1)%rollupFoldEvery == 0 {
			b.Queue(rollupFoldSQL)
		}
	}
	if len(g.closes) == 0 && channel != "" && len(g.payloads) > 0 {
		// The usual group, of many runs or of one: its sessions, runs and
		// notifications in one statement (the closes of waiting steps,
		// rare, keep their place between the runs and the notifications).
		argv := g.allArgs[:0]
		switch {
		case len(g.sessOrder) > 1 && len(g.runOrder) > 1:
			argv = append(append(argv, g.sessionArgs()...), g.runArgs()...)
			b.Queue(groupWritesSQL, append(argv, channel, &g.payloads)...)
			return b
		case len(g.sessOrder) == 1 && len(g.runOrder) == 1:
			argv = g.appendRunArgs(g.appendSessionArgs(argv))
			b.Queue(loneWritesSQL, append(argv, channel, &g.payloads)...)
			return b
		}
	}
	switch len(g.sessOrder) {
	case 0:
	case 1:
		b.Queue(sessionTotalsSQL, g.appendSessionArgs(nil)...)
	default:
		b.Queue(sessionTotalsManySQL, g.sessionArgs()...)
	}
	switch len(g.runOrder) {
	case 0:
	case 1:
		b.Queue(runUpdateSQL, g.appendRunArgs(nil)...)
	default:
		b.Queue(runUpdateManySQL, g.runArgs()...)
	}
	for _, cl := range g.closes {
		b.Queue(closeWaitingSQL, cl.status, cl.body, cl.id)
	}
	switch {
	case channel == "" || len(g.payloads) == 0:
	case len(g.payloads) == 1:
		b.Queue(`SELECT pg_notify($1, $2)`, channel, g.payloads[0])
	default:
		b.Queue(notifyManySQL, channel, g.payloads)
	}
	return b
}

// appendSessionArgs appends the parameters of sessionTotalsSQL for the
// group's one session to argv.
func (g *groupState) appendSessionArgs(argv []any) []any {
	s := g.sessions[g.sessOrder[0]]
	return append(argv, s.LastSequence, s.InputTokens, s.OutputTokens, s.Cost, nanos(s.UpdatedAt), s.ID)
}

// appendRunArgs appends the parameters of runUpdateSQL for the group's one
// run to argv.
func (g *groupState) appendRunArgs(argv []any) []any {
	r := g.runs[g.runOrder[0]]
	return append(argv, string(r.Status), r.Cursor, blob(r.State), r.Output, g.runErr[r.ID], r.StepCount, blob(r.Options),
		r.LeaseOwner, nanos(r.LeaseExpires), nanos(r.UpdatedAt), nanos(r.FinishedAt), r.ID)
}

// sessionArgs returns the parameters of sessionTotalsManySQL for the
// group's sessions.
func (g *groupState) sessionArgs() []any {
	c := &g.sessCols
	if len(c.ids) > 0 {
		// Made already, for the fold of the totals (writes).
		return c.argv[:]
	}
	for _, id := range g.sessOrder {
		s := g.sessions[id]
		c.ids, c.seqs, c.in, c.out = append(c.ids, s.ID), append(c.seqs, s.LastSequence), append(c.in, s.InputTokens), append(c.out, s.OutputTokens)
		c.cost, c.upd = append(c.cost, s.Cost), append(c.upd, nanos(s.UpdatedAt))
	}
	c.argv = [...]any{&c.ids, &c.seqs, &c.in, &c.out, &c.cost, &c.upd}
	return c.argv[:]
}

// runArgs returns the parameters of runUpdateManySQL for the group's runs.
func (g *groupState) runArgs() []any {
	c := &g.runCols
	for _, id := range g.runOrder {
		r := g.runs[id]
		c.ids, c.statuses, c.cursors = append(c.ids, r.ID), append(c.statuses, string(r.Status)), append(c.cursors, r.Cursor)
		c.outputs, c.owners = append(c.outputs, r.Output), append(c.owners, r.LeaseOwner)
		c.states, c.errs, c.options = append(c.states, blob(r.State)), append(c.errs, g.runErr[id]), append(c.options, blob(r.Options))
		c.counts, c.expires = append(c.counts, r.StepCount), append(c.expires, nanos(r.LeaseExpires))
		c.updated, c.finished = append(c.updated, nanos(r.UpdatedAt)), append(c.finished, nanos(r.FinishedAt))
	}
	c.argv = [...]any{&c.ids, &c.statuses, &c.cursors, &c.states, &c.outputs, &c.errs, &c.counts, &c.options, &c.owners, &c.expires,
		&c.updated, &c.finished}
	return c.argv[:]
}

// sessionColumns are the parameters of sessionTotalsManySQL, kept with a
// released group state (reset) like its step columns, and passed as
// pointers in a slice of their own (stepColumns.args).
type sessionColumns struct {
	ids                []string
	seqs, in, out, upd []int64
	cost               []float64
	argv               [6]any
}

// reset empties the columns, keeping their arrays (zeroed where they hold
// references).
func (c *sessionColumns) reset() {
	c.argv = [6]any{}
	c.ids, c.seqs, c.in, c.out, c.upd, c.cost = emptied(c.ids), c.seqs[:0], c.in[:0], c.out[:0], c.upd[:0], c.cost[:0]
}

// runColumns are the parameters of runUpdateManySQL (sessionColumns).
type runColumns struct {
	ids, statuses, cursors, outputs, owners []string
	states, errs, options                   [][]byte
	counts, expires, updated, finished      []int64
	argv                                    [12]any
}

func (c *runColumns) reset() {
	c.argv = [12]any{}
	c.ids, c.statuses, c.cursors, c.outputs, c.owners = emptied(c.ids), emptied(c.statuses), emptied(c.cursors), emptied(c.outputs), emptied(c.owners)
	c.states, c.errs, c.options = emptied(c.states), emptied(c.errs), emptied(c.options)
	c.counts, c.expires, c.updated, c.finished = c.counts[:0], c.expires[:0], c.updated[:0], c.finished[:0]
}
