package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// stepInsertSQL inserts the placed steps of one append in one statement.
// It has no ON CONFLICT clause: the ids already stored were read under the
// session lock, and an id inserted since (by an append to another session)
// violates the primary key, which aborts the transaction before its
// pipelined COMMIT; the append then runs again and returns the stored row.
const stepInsertSQL = `INSERT INTO steps (id, session_id, sequence, run_id, kind, status, hop, created_at, body, expires_at)
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bigint[], $9::bytea[], $10::bigint[])`

const sessionTotalsSQL = `UPDATE sessions SET last_seq = $1, input_tokens = $2, output_tokens = $3, cost = $4, updated_at = $5 WHERE id = $6`

// StepAppend implements store.Store in two round trips. The first begins
// the transaction, locks the sessions of the steps and the runs to update
// (FOR NO KEY UPDATE, in id order) and reads which step ids are stored
// already; the second inserts the steps, writes the sessions' last_seq and
// totals and the runs, and commits. Concurrent appends to one session,
// from any number of processes, queue on its row, and each takes last_seq
// + 1: sequences are gap-free without retries. A step whose id is stored
// already is returned as stored (idempotent append); run fences are
// checked by rules.UpdateRun on the locked rows, and any failure writes
// nothing.
func (s *Store) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckAppend(p); err != nil {
		return nil, err
	}
	// The JSON work happens once, outside the transaction; a retry only
	// splices in new sequences.
	now := rules.Now(time.Time{})
	pre := make([]*rules.PreEncoded, len(p.Steps))
	for i, st := range p.Steps {
		var err error
		if pre[i], err = rules.PreEncode(st, now); err != nil {
			return nil, err
		}
	}
	ch := s.changesChannel()
	bodies, err := inTx(s, ctx, func(tx *wtx) ([][]byte, error) { return appendTx(ctx, tx, p, pre, now, ch) })
	if err != nil {
		return nil, err
	}
	return decodeBodies(bodies)
}

// appendLocked is what the first round trip of an append reads.
type appendLocked struct {
	sessions map[string]*steptype.Session
	stored   map[string][]byte // bodies of the step ids already stored
	runs     map[string]*steptype.Run
	dbNow    int64         // the database clock
	waiting  []waitingStep // the waiting steps of the runs
}

// lockForAppend locks the sessions and runs an append writes and reads
// the step ids it would insert, in one round trip.
func lockForAppend(ctx context.Context, tx *wtx, p *store.StepAppendParams) (*appendLocked, error) {
	var sessionIDs, stepIDs, runIDs []string
	for _, st := range p.Steps {
		sessionIDs, stepIDs = append(sessionIDs, st.SessionID), append(stepIDs, st.ID)
	}
	for _, u := range p.Runs {
		runIDs = append(runIDs, u.ID)
	}
	slices.Sort(sessionIDs)
	slices.Sort(runIDs)
	l := &appendLocked{sessions: map[string]*steptype.Session{}, stored: map[string][]byte{}, runs: map[string]*steptype.Run{}}
	b := &pgx.Batch{}
	if len(sessionIDs) > 0 {
		b.Queue(`SELECT `+sessionCols+` FROM sessions WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`,
			slices.Compact(sessionIDs)).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				sess, err := scanSession(rows)
				if err != nil {
					return err
				}
				l.sessions[sess.ID] = sess
			}
			return rows.Err()
		})
		// After the lock: sees every step committed by the previous holder.
		b.Queue(`SELECT id, body FROM steps WHERE id = ANY($1)`, stepIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				var body []byte
				if err := rows.Scan(&id, &body); err != nil {
					return err
				}
				l.stored[id] = body
			}
			return rows.Err()
		})
	}
	if len(runIDs) > 0 {
		b.Queue(`SELECT `+runCols+` FROM runs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`,
			slices.Compact(runIDs)).Query(func(rows pgx.Rows) error {
			runs, err := scanRuns(rows)
			for _, r := range runs {
				l.runs[r.ID] = r
			}
			return err
		})
		queueDBNow(b, &l.dbNow)
		queueWaiting(b, runIDs, &l.waiting)
	}
	if b.Len() == 0 {
		return l, nil
	}
	return l, tx.send(ctx, b, false)
}

// stepColumns accumulates the steps to insert, column by column.
type stepColumns struct {
	ids, sessions, runs, kinds, statuses []string
	seqs, created, expires               []int64
	hops                                 []int32
	bodies                               [][]byte
}

func (c *stepColumns) add(st *steptype.Step, seq int64, body []byte) {
	c.ids, c.sessions, c.runs = append(c.ids, st.ID), append(c.sessions, st.SessionID), append(c.runs, st.RunID)
	c.kinds, c.statuses = append(c.kinds, string(st.Kind)), append(c.statuses, string(st.Status))
	c.seqs, c.created, c.hops = append(c.seqs, seq), append(c.created, nanos(st.CreatedAt)), append(c.hops, int32(st.Hop))
	c.bodies = append(c.bodies, body)
	c.expires = append(c.expires, rules.ExpiryNanos(st))
}

func appendTx(ctx context.Context, tx *wtx, p *store.StepAppendParams, pre []*rules.PreEncoded, now time.Time, channel string) ([][]byte, error) {
	l, err := lockForAppend(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	bodies := make([][]byte, 0, len(pre))
	var cols stepColumns
	var touched []*steptype.Session // in first-touch order
	inserted := make([]bool, len(pre))
	for i, pe := range pre {
		in := pe.Step
		// A stored id (before this call, or earlier in it) is returned as
		// stored, whatever the new step asks for.
		if body, ok := l.stored[in.ID]; ok {
			bodies = append(bodies, body)
			continue
		}
		sess := l.sessions[in.SessionID]
		if sess == nil {
			return nil, rules.NotFound("session", in.SessionID)
		}
		seq := sess.LastSequence + 1
		if err := rules.CheckSequence(pe.In, seq); err != nil {
			return nil, err
		}
		body, err := pe.Body(seq)
		if err != nil {
			return nil, err
		}
		cols.add(in, seq, body)
		inserted[i] = true
		l.stored[in.ID] = body
		if !slices.Contains(touched, sess) {
			touched = append(touched, sess)
		}
		sess.LastSequence, sess.UpdatedAt = seq, now
		rules.AddTotals(sess, in, 1)
		bodies = append(bodies, body)
	}
	var changed []*steptype.Run // in first-update order
	before := map[string]*steptype.Run{}
	for _, u := range p.Runs {
		r := l.runs[u.ID]
		if r == nil {
			return nil, rules.NotFound("run", u.ID)
		}
		if before[r.ID] == nil {
			before[r.ID] = rules.CloneRun(r)
		}
		if err := rules.UpdateRun(r, rules.Counted(u, p.Steps, func(i int) bool { return inserted[i] }), fromNanos(l.dbNow)); err != nil {
			return nil, err
		}
		if !slices.Contains(changed, r) {
			changed = append(changed, r)
		}
	}
	b := &pgx.Batch{}
	if len(cols.ids) > 0 {
		b.Queue(stepInsertSQL, cols.ids, cols.sessions, cols.seqs, cols.runs, cols.kinds, cols.statuses,
			cols.hops, cols.created, cols.bodies, cols.expires)
	}
	for _, sess := range touched {
		b.Queue(sessionTotalsSQL, sess.LastSequence, sess.InputTokens, sess.OutputTokens, sess.Cost, nanos(sess.UpdatedAt), sess.ID)
	}
	var c changes
	for _, sess := range touched {
		c.step(sess.ID, sess.LastSequence)
	}
	for _, r := range changed {
		args, err := runUpdateArgs(r)
		if err != nil {
			return nil, err
		}
		b.Queue(runUpdateSQL, args...)
		if rules.Finishing(before[r.ID], r) {
			if err := closeWaiting(b, l.waiting, r); err != nil {
				return nil, err
			}
		}
		c.run(before[r.ID].Status, r)
	}
	c.queue(b, channel)
	if b.Len() > 0 {
		if err := tx.send(ctx, b, true); err != nil {
			if isBusy(err) {
				return nil, rules.SessionBusy(changed[0].SessionID)
			}
			if pe := pgError(err); pe != nil && pe.Code == codeUniqueViolation && pe.ConstraintName == "steps_pkey" {
				// An id was inserted, in another session, after our read:
				// a new attempt returns it as stored.
				return nil, errRaced
			}
			return nil, err
		}
	}
	return bodies, nil
}

// StepTruncate implements store.Store.
func (s *Store) StepTruncate(ctx context.Context, p *store.StepTruncateParams) (int64, error) {
	if p == nil || p.SessionID == "" {
		return 0, rules.Invalid("session id is required")
	}
	return inTx(s, ctx, func(tx *wtx) (int64, error) {
		sess, err := lockSession(ctx, tx, p.SessionID, "FOR NO KEY UPDATE")
		if err != nil {
			return 0, err
		}
		fs, err := forks(ctx, tx, p.SessionID)
		if err != nil {
			return 0, err
		}
		if err := rules.CheckTruncate(p, sess, fs); err != nil {
			return 0, err
		}
		// A run that has not finished would continue on a cut history.
		if r, err := unfinishedRun(ctx, tx, p.SessionID); err != nil || r != nil {
			if err == nil {
				err = rules.Unfinished(p.SessionID, r)
			}
			return 0, err
		}
		if p.StartSeq > sess.LastSequence {
			return 0, nil
		}
		rows, err := tx.Query(ctx, `DELETE FROM steps WHERE session_id = $1 AND sequence >= $2 RETURNING body`, p.SessionID, p.StartSeq)
		if err != nil {
			return 0, err
		}
		deleted, err := collect(rows, nil)
		if err != nil {
			return 0, err
		}
		for _, body := range deleted {
			st, err := rules.DecodeStep(body)
			if err != nil {
				return 0, err
			}
			rules.AddTotals(sess, st, -1)
		}
		sess.LastSequence = p.StartSeq - 1
		if !p.KeepActivity {
			sess.UpdatedAt = rules.Now(time.Time{})
		}
		_, err = tx.Exec(ctx, sessionTotalsSQL, sess.LastSequence, sess.InputTokens, sess.OutputTokens, sess.Cost, nanos(sess.UpdatedAt), sess.ID)
		return int64(len(deleted)), err
	})
}
