package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// StepAppend implements store.Store. Sequences come from sessions.last_seq
// (read through the writer's row cache) and are written back in the same
// transaction as the inserts; the writer serializes transactions, so
// allocation is gap-free without retries.
func (s *Store) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	if err := rules.CheckAppend(p); err != nil {
		return nil, err
	}
	// The JSON work happens here, in the caller's goroutine; the writer
	// only splices the sequence in.
	now := rules.Now(time.Time{})
	pre := make([]*rules.PreEncoded, len(p.Steps))
	for i, st := range p.Steps {
		var err error
		encode := rules.PreEncodeClone
		if p.InPlace {
			encode = rules.PreEncode // the given step is returned: no copy to make
		}
		if pre[i], err = encode(st, now); err != nil {
			return nil, err
		}
	}
	placed, err := write(s, ctx, func(tx *wtx) ([]appended, error) { return tx.stepAppend(p, pre, now) })
	if err != nil {
		return nil, err
	}
	// Off the writer goroutine: a new row is returned as the placed copy it
	// was encoded from (a deep copy made before encoding, normalized as the
	// wire format would, without decoding the JSON just encoded); a stored
	// one (an idempotent re-append) is decoded from its body. With
	// p.InPlace a new row is the given step, placed, and nothing was copied.
	out := make([]*steptype.Step, len(placed))
	for i, a := range placed {
		if a.pre == nil || !a.pre.Verbatim() {
			if out[i], err = rules.DecodeStep(a.body); err != nil {
				return nil, err
			}
			continue
		}
		if p.InPlace {
			// Handed over: the given step gets what was placed; the
			// shallow placed copy it was encoded from shares its memory
			// and is dropped.
			out[i] = rules.HandOver(a.pre.In, a.seq, a.pre.Step.CreatedAt)
			continue
		}
		c := a.pre.Step // a deep copy already (PreEncodeClone), used by nothing else now
		c.Sequence = a.seq
		out[i] = rules.NormalizeStep(c)
	}
	return out, nil
}

// appended is one result of StepAppend: a new row (pre at seq, with its
// body) or the body of the row that already held the id.
type appended struct {
	pre  *rules.PreEncoded
	seq  int64
	body []byte
}

func (tx *wtx) stepAppend(p *store.StepAppendParams, pre []*rules.PreEncoded, now time.Time) ([]appended, error) {
	bodies := make([]appended, 0, len(p.Steps))
	var sessions []*steptype.Session // touched, in first-touch order
	inserted := make([]bool, len(pre))
	for i, pe := range pre {
		in := pe.Step
		var sess *steptype.Session
		for _, t := range sessions {
			if t.ID == in.SessionID {
				sess = t
			}
		}
		if sess == nil {
			var err error
			if sess, err = tx.session(in.SessionID); err != nil {
				return tx.storedOr(bodies, in.ID, err)
			}
			sessions = append(sessions, sess)
		}
		seq := sess.LastSequence + 1
		if err := rules.CheckSequence(pe.In, seq); err != nil {
			return tx.storedOr(bodies, in.ID, err)
		}
		body, err := pe.Body(seq)
		if err != nil {
			return nil, err
		}
		res, err := tx.st.stepInsert.ExecContext(bg, in.ID, in.SessionID, seq, in.RunID, string(in.Kind),
			string(in.Status), in.Hop, nanos(in.CreatedAt), body, rules.ExpiryNanos(in),
			string(in.Role), in.Metrics.InputTokens, in.Metrics.OutputTokens, in.Metrics.CachedTokens, in.Metrics.Cost)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			// The id is taken (ON CONFLICT DO NOTHING): idempotent append,
			// the stored row stands and the sequence is not used.
			if bodies, err = tx.storedOr(bodies, in.ID, err); err != nil {
				return nil, err
			}
			continue
		}
		inserted[i] = true
		tx.noteInsert(res)
		sess.LastSequence = seq
		sess.UpdatedAt = now
		rules.AddTotals(sess, in, 1)
		bodies = append(bodies, appended{pre: pe, seq: seq, body: body})
	}
	for _, sess := range sessions {
		if err := tx.saveTotals(sess); err != nil {
			return nil, err
		}
	}
	for _, u := range p.Runs {
		if err := tx.advanceRun(rules.Counted(u, p.Steps, func(i int) bool { return inserted[i] })); err != nil {
			return nil, err
		}
	}
	return bodies, nil
}

// storedOr appends the stored body of step id to bodies when the step
// exists (an idempotent re-append); otherwise it fails with err, or
// ErrNotFound when err is nil.
func (tx *wtx) storedOr(bodies []appended, id string, err error) ([]appended, error) {
	var body []byte
	switch qerr := tx.st.stepBody.QueryRowContext(bg, id).Scan(&body); {
	case qerr == nil:
		return append(bodies, appended{body: body}), nil
	case !errors.Is(qerr, sql.ErrNoRows):
		return nil, qerr
	case err != nil:
		return nil, err
	}
	return nil, rules.NotFound("step", id)
}

// StepTruncate implements store.Store.
func (s *Store) StepTruncate(ctx context.Context, p *store.StepTruncateParams) (int64, error) {
	if p == nil || p.SessionID == "" {
		return 0, rules.Invalid("session id is required")
	}
	return write(s, ctx, func(tx *wtx) (int64, error) {
		sess, err := tx.session(p.SessionID)
		if err != nil {
			return 0, err
		}
		forks, err := tx.forks(p.SessionID)
		if err != nil {
			return 0, err
		}
		if err := rules.CheckTruncate(p, sess, forks); err != nil {
			return 0, err
		}
		if r, err := tx.unfinishedRun(p.SessionID); err != nil || r != nil {
			if err == nil {
				err = rules.Unfinished(p.SessionID, r)
			}
			return 0, err
		}
		if p.StartSeq > sess.LastSequence {
			return 0, nil
		}
		rows, err := tx.conn().QueryContext(bg, `DELETE FROM steps WHERE session_id = ? AND sequence >= ? RETURNING body`,
			p.SessionID, p.StartSeq)
		if err != nil {
			return 0, err
		}
		var n int64
		for rows.Next() {
			var body []byte
			if err := rows.Scan(&body); err != nil {
				rows.Close()
				return 0, err
			}
			st, err := rules.DecodeStep(body)
			if err != nil {
				rows.Close()
				return 0, err
			}
			rules.AddTotals(sess, st, -1)
			n++
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return 0, err
		}
		sess.LastSequence = p.StartSeq - 1
		if !p.KeepActivity {
			sess.UpdatedAt = rules.Now(time.Time{})
		}
		return n, tx.saveTotals(sess)
	})
}

// StepResolve implements store.Store. The writer serializes resolutions,
// so of concurrent ones exactly the first sees the step waiting.
func (s *Store) StepResolve(ctx context.Context, p *store.StepResolveParams) (*steptype.Step, error) {
	if err := rules.CheckResolve(p); err != nil {
		return nil, err
	}
	body, err := write(s, ctx, func(tx *wtx) ([]byte, error) {
		var body []byte
		var runID string
		err := tx.st.stepForResolve.QueryRowContext(bg, p.ID).Scan(&body, &runID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, rules.NotFound("step", p.ID)
		}
		if err != nil {
			return nil, err
		}
		st, err := rules.DecodeStep(body)
		if err != nil {
			return nil, err
		}
		if err := rules.Resolve(st, p); err != nil {
			return nil, err
		}
		if body, err = rules.EncodeStep(st); err != nil {
			return nil, err
		}
		var run *steptype.Run
		if runID != "" {
			if run, err = tx.run(runID); errors.Is(err, store.ErrNotFound) {
				run, err = nil, nil // a step of a run that is gone
			}
			if err != nil {
				return nil, err
			}
			if run != nil && run.Status.Terminal() {
				return nil, rules.Conflict("run %q of step %q is %s", run.ID, st.ID, run.Status)
			}
		}
		if _, err := tx.st.stepResolve.ExecContext(bg, string(st.Status), body, st.ID); err != nil {
			return nil, err
		}
		if run != nil && p.FailRun != nil {
			r := rules.CloneRun(run)
			if !rules.FailWaiting(r, p.FailRun, rules.Now(p.Now)) {
				return body, nil
			}
			return body, tx.saveRun(run, r)
		}
		if !p.QueueRun || run == nil {
			return body, nil
		}
		var waiting bool
		if err := tx.st.stepWaiting.QueryRowContext(bg, runID).Scan(&waiting); err != nil || waiting {
			return body, err
		}
		r, err := tx.run(runID)
		if errors.Is(err, store.ErrNotFound) {
			return body, nil
		}
		if err != nil {
			return nil, err
		}
		if rules.Requeue(r, rules.Now(p.Now)) {
			err = tx.saveRun(nil, r)
		}
		return body, err
	})
	if err != nil {
		return nil, err
	}
	return rules.DecodeStep(body)
}
