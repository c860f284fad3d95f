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

// StepAppend implements store.Store. Sequences come from sessions.last_seq,
// read and updated in the same transaction as the inserts; the writer
// serializes transactions, so allocation is gap-free without retries.
func (s *Store) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	if err := rules.CheckAppend(p); err != nil {
		return nil, err
	}
	bodies, err := write(s, ctx, func(tx *wtx) ([][]byte, error) { return tx.stepAppend(p) })
	if err != nil {
		return nil, err
	}
	return decodeBodies(bodies) // off the writer goroutine
}

func (tx *wtx) stepAppend(p *store.StepAppendParams) ([][]byte, error) {
	now := rules.Now(time.Time{})
	bodies := make([][]byte, 0, len(p.Steps))
	var sessions []*steptype.Session // touched, in first-touch order
	for _, in := range p.Steps {
		var body []byte
		err := tx.st.stepBody.QueryRowContext(bg, in.ID).Scan(&body)
		if err == nil { // idempotent append: the stored row stands
			bodies = append(bodies, body)
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		var sess *steptype.Session
		for _, t := range sessions {
			if t.ID == in.SessionID {
				sess = t
			}
		}
		if sess == nil {
			if sess, err = tx.session(in.SessionID); err != nil {
				return nil, err
			}
			sessions = append(sessions, sess)
		}
		st, err := rules.PlaceStep(in, sess.LastSequence+1, now)
		if err != nil {
			return nil, err
		}
		if body, err = rules.EncodeStep(st); err != nil {
			return nil, err
		}
		_, err = tx.st.stepInsert.ExecContext(bg, st.ID, st.SessionID, st.Sequence, st.RunID, string(st.Kind),
			string(st.Status), st.Hop, nanos(st.CreatedAt), body)
		if err != nil {
			return nil, err
		}
		sess.LastSequence = st.Sequence
		sess.UpdatedAt = now
		rules.AddTotals(sess, st, 1)
		bodies = append(bodies, body)
	}
	for _, sess := range sessions {
		if err := tx.saveTotals(sess); err != nil {
			return nil, err
		}
	}
	for _, u := range p.Runs {
		if _, err := tx.updateRun(u); err != nil {
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
		sess.UpdatedAt = rules.Now(time.Time{})
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
		if _, err := tx.st.stepResolve.ExecContext(bg, string(st.Status), body, st.ID); err != nil {
			return nil, err
		}
		if !p.QueueRun || runID == "" {
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
			err = tx.saveRun(r)
		}
		return body, err
	})
	if err != nil {
		return nil, err
	}
	return rules.DecodeStep(body)
}
