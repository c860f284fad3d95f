package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// stepInsertSQL inserts the placed steps of one append in one statement.
// It has no ON CONFLICT clause: the ids already stored were read under the
// session lock, and an id inserted since (by an append to another session)
// violates the primary key, which aborts the transaction before its
// pipelined COMMIT; the append then runs again and returns the stored row.
// The role and usage columns (migration 00075) are what the body says,
// filled from the step here so the statements that keep the rollups and
// totals (stepGroupInsertSQL, steps_inserted) read them
// without parsing the body; an empty role and zeros are stored as NULL.
const stepInsertSQL = `INSERT INTO steps (id, session_id, sequence, run_id, kind, status, hop, created_at, body, expires_at,
		role, input_tokens, output_tokens, cached_tokens, cost)
	SELECT id, sid, seq, run, kind, status, hop, created, body, expires,
		NULLIF(role, ''), NULLIF(it, 0), NULLIF(ot, 0), NULLIF(ct, 0), NULLIF(cost, 0)
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bigint[], $9::bytea[], $10::bigint[],
		$11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $15::float8[])
		AS u(id, sid, seq, run, kind, status, hop, created, body, expires, role, it, ot, ct, cost)`

const sessionTotalsSQL = `UPDATE sessions SET last_seq = $1, input_tokens = $2, output_tokens = $3, cost = $4, updated_at = $5 WHERE id = $6`

// StepAppend implements store.Store in two round trips: the first begins
// the transaction, locks the sessions of the steps and the runs to update
// (FOR NO KEY UPDATE, in id order) and reads which step ids are stored
// already; the second inserts the steps, writes the sessions' last_seq and
// totals and the runs, and commits. Concurrent appends to one session,
// from any number of processes, queue on its row, and each takes last_seq
// + 1: sequences are gap-free without retries. A step whose id is stored
// already is returned as stored (idempotent append); run fences are
// checked by rules.UpdateRun on the locked rows, and any failure writes
// nothing.
//
// Appends are group-committed (group.go): those that arrive while another
// append of the Store is committing share the next transaction, which
// locks, checks and writes all of them with the same statements and one
// COMMIT; each is checked on the rows as the appends before it in the
// group left them, and one that fails its checks fails alone.
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
	req := newAppendReq(ctx, p, now)
	defer req.release()
	encode := rules.PreEncodeClone
	if p.InPlace {
		encode = rules.PreEncode // the given step is returned: no copy to make
	}
	for i, st := range p.Steps {
		var err error
		if req.pre[i], err = encode(st, now); err != nil {
			return nil, err
		}
	}
	s.appendGrouped(req)
	var out []*steptype.Step
	err := req.err
	if err == nil {
		out, err = placedSteps(req.out, p.Steps, p.InPlace)
	}
	// Answered: no group works on req any more, and its result no longer
	// reads the bodies (Sequenced) in the pre-encoded steps' buffers, which
	// serve the next appends with the PreEncoded themselves.
	for _, pe := range req.pre {
		pe.Release()
	}
	return out, err
}

// placedSteps returns the steps of an append: a new row as the placed copy
// it was encoded from (a deep copy made before encoding, normalized as the
// wire format would, without decoding the JSON just encoded) or, with
// inPlace, as the given step itself, placed (nothing was copied); a stored
// one (an idempotent re-append) decoded from its body. When every step is
// the given one, the result is the given slice (StepAppendParams.InPlace):
// no slice is made.
func placedSteps(placed []appended, given []*steptype.Step, inPlace bool) ([]*steptype.Step, error) {
	var out []*steptype.Step // nil while every step so far is the given one
	for i, a := range placed {
		var st *steptype.Step
		switch {
		case a.pre == nil || !a.pre.Verbatim():
			var err error
			if st, err = rules.DecodeStep(a.body); err != nil {
				return nil, err
			}
		case inPlace:
			// Handed over: the given step gets what was placed; the
			// shallow placed copy it was encoded from shares its memory
			// and is dropped.
			st = rules.HandOver(a.pre.In, a.seq, a.pre.Step.CreatedAt)
		default:
			st = a.pre.Step // a deep copy already (PreEncodeClone), used by nothing else now
			st.Sequence = a.seq
			st = rules.NormalizeStep(st)
		}
		if out == nil && (!inPlace || st != given[i]) {
			out = make([]*steptype.Step, len(placed))
			copy(out, given[:i])
		}
		if out != nil {
			out[i] = st
		}
	}
	if out == nil && len(placed) > 0 {
		return given, nil
	}
	if out == nil {
		out = []*steptype.Step{}
	}
	return out, nil
}

// stepColumns accumulates the steps to insert, column by column.
type stepColumns struct {
	ids, sessions, runs, kinds, statuses, roles []string
	seqs, created, expires                      []int64
	inTok, outTok, cachedTok                    []int64
	cost                                        []float64
	hops                                        []int32
	bodies                                      [][]byte
	argv                                        [15]any // args
}

// args returns the parameters of stepInsertSQL: pointers to the columns
// (fastArrays), in a slice of c's own, so that no parameter is allocated.
// They are c's columns as they are when the statement is encoded.
func (c *stepColumns) args() []any {
	c.argv = [...]any{&c.ids, &c.sessions, &c.seqs, &c.runs, &c.kinds, &c.statuses, &c.hops, &c.created, &c.bodies, &c.expires,
		&c.roles, &c.inTok, &c.outTok, &c.cachedTok, &c.cost}
	return c.argv[:]
}

// grow makes room for n more steps in every column, so that a group's
// columns are allocated once instead of doubling step by step.
func (c *stepColumns) grow(n int) {
	c.ids, c.sessions, c.runs = slices.Grow(c.ids, n), slices.Grow(c.sessions, n), slices.Grow(c.runs, n)
	c.kinds, c.statuses, c.roles = slices.Grow(c.kinds, n), slices.Grow(c.statuses, n), slices.Grow(c.roles, n)
	c.seqs, c.created, c.expires = slices.Grow(c.seqs, n), slices.Grow(c.created, n), slices.Grow(c.expires, n)
	c.inTok, c.outTok, c.cachedTok = slices.Grow(c.inTok, n), slices.Grow(c.outTok, n), slices.Grow(c.cachedTok, n)
	c.cost, c.hops, c.bodies = slices.Grow(c.cost, n), slices.Grow(c.hops, n), slices.Grow(c.bodies, n)
}

// reset empties every column, keeping their arrays (zeroed: they keep
// nothing alive).
func (c *stepColumns) reset() {
	c.ids, c.sessions, c.runs = emptied(c.ids), emptied(c.sessions), emptied(c.runs)
	c.kinds, c.statuses, c.roles = emptied(c.kinds), emptied(c.statuses), emptied(c.roles)
	c.seqs, c.created, c.expires = c.seqs[:0], c.created[:0], c.expires[:0]
	c.inTok, c.outTok, c.cachedTok = c.inTok[:0], c.outTok[:0], c.cachedTok[:0]
	c.cost, c.hops, c.bodies = c.cost[:0], c.hops[:0], emptied(c.bodies)
}

func (c *stepColumns) add(st *steptype.Step, seq int64, body []byte) {
	c.ids, c.sessions, c.runs = append(c.ids, st.ID), append(c.sessions, st.SessionID), append(c.runs, st.RunID)
	c.kinds, c.statuses = append(c.kinds, string(st.Kind)), append(c.statuses, string(st.Status))
	c.seqs, c.created, c.hops = append(c.seqs, seq), append(c.created, nanos(st.CreatedAt)), append(c.hops, int32(st.Hop))
	c.bodies = append(c.bodies, body)
	c.expires = append(c.expires, rules.ExpiryNanos(st))
	m := &st.Metrics
	c.roles, c.cost = append(c.roles, string(st.Role)), append(c.cost, m.Cost)
	c.inTok, c.outTok, c.cachedTok = append(c.inTok, m.InputTokens), append(c.outTok, m.OutputTokens), append(c.cachedTok, m.CachedTokens)
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
