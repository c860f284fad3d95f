package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// chainSQL returns a session and its ancestors, the session first.
const chainSQL = `WITH RECURSIVE chain (id, parent, fork, last, depth) AS (
	SELECT id, parent_session_id, fork_sequence, last_seq, 0 FROM sessions WHERE id = $1
	UNION ALL
	SELECT s.id, s.parent_session_id, s.fork_sequence, s.last_seq, c.depth + 1
	FROM sessions s JOIN chain c ON s.id = c.parent
) SELECT id, COALESCE(parent, ''), fork, last FROM chain ORDER BY depth`

// lineage reads the fork chain of a session, or fails with ErrNotFound.
func (s *Store) lineage(ctx context.Context, sessionID string) ([]rules.Link, error) {
	rows, err := s.pool.Query(ctx, chainSQL, sessionID)
	if err != nil {
		return nil, err
	}
	links, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rules.Link, error) {
		var l rules.Link
		err := row.Scan(&l.SessionID, &l.ParentSessionID, &l.ForkSequence, &l.LastSequence)
		return l, err
	})
	if err != nil {
		return nil, err
	}
	if len(links) == 0 {
		return nil, rules.NotFound("session", sessionID)
	}
	return links, nil
}

func kindFilter(kinds []steptype.Kind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// StepList implements store.Store.
//
// A lineage read takes two round trips: the fork chain (one recursive
// query), then each stored segment with an index range scan, pipelined.
// The chain's last sequence bounds the read, so it returns the log as it
// was when the chain was read, less any steps truncated since.
func (s *Store) StepList(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	bodies, err := s.stepBodies(ctx, p)
	if err != nil {
		return nil, err
	}
	return decodeBodies(bodies)
}

// stepBodies reads the stored bodies StepList decodes.
func (s *Store) stepBodies(ctx context.Context, p *store.StepListParams) ([][]byte, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	follow, err := rules.CheckList(p)
	if err != nil {
		return nil, err
	}
	var chain []rules.Link
	if p.SessionID != "" {
		if chain, err = s.lineage(ctx, p.SessionID); err != nil {
			return nil, mapErr(err)
		}
	}
	if p.EndSeq > 0 && p.EndSeq < p.StartSeq {
		return nil, nil
	}
	var bodies [][]byte
	if follow {
		bodies, err = s.listLineage(ctx, chain, p)
	} else {
		bodies, err = s.listFiltered(ctx, p)
	}
	if err != nil {
		return nil, mapErr(err)
	}
	return bodies, nil
}

// listLineage reads the segments of a session's lineage in order.
func (s *Store) listLineage(ctx context.Context, chain []rules.Link, p *store.StepListParams) ([][]byte, error) {
	segs := rules.Segments(chain, p.StartSeq, p.EndSeq)
	order := "ASC"
	if p.Desc {
		order = "DESC"
		for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
			segs[i], segs[j] = segs[j], segs[i]
		}
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	q := `SELECT body FROM steps WHERE session_id = $1 AND sequence BETWEEN $2 AND $3`
	if len(p.Kinds) > 0 {
		q += ` AND kind = ANY($5)`
	}
	q += ` ORDER BY sequence ` + order + ` LIMIT $4`
	bodies := [][]byte{}
	b := &pgx.Batch{}
	for _, seg := range segs {
		args := []any{seg.SessionID, seg.From, seg.To, limit}
		if len(p.Kinds) > 0 {
			args = append(args, kindFilter(p.Kinds))
		}
		b.Queue(q, args...).Query(func(rows pgx.Rows) error {
			var err error
			bodies, err = collect(rows, bodies)
			return err
		})
	}
	if b.Len() == 0 {
		return bodies, nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if p.Limit > 0 && len(bodies) > p.Limit {
		bodies = bodies[:p.Limit]
	}
	return bodies, nil
}

// listFiltered reads steps by run and/or status, without lineage.
func (s *Store) listFiltered(ctx context.Context, p *store.StepListParams) ([][]byte, error) {
	where := []string{"TRUE"}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.SessionID != "" {
		where = append(where, "session_id = "+arg(p.SessionID))
	}
	if p.RunID != "" {
		// "run_id <> ''" lets the planner use the partial index steps_run.
		where = append(where, "run_id = "+arg(p.RunID), "run_id <> ''")
	}
	if p.Status != "" {
		// Inlined (CheckList allows known statuses only) so the partial
		// index on waiting steps applies.
		where = append(where, fmt.Sprintf("status = '%s'", p.Status))
	}
	if p.StartSeq > 0 {
		where = append(where, "sequence >= "+arg(p.StartSeq))
	}
	if p.EndSeq > 0 {
		where = append(where, "sequence <= "+arg(p.EndSeq))
	}
	if len(p.Kinds) > 0 {
		where = append(where, "kind = ANY("+arg(kindFilter(p.Kinds))+")")
	}
	order := "ASC"
	if p.Desc {
		order = "DESC"
	}
	q := `SELECT body FROM steps WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY sequence ` + order + `, id ` + order
	if p.Limit > 0 {
		q += ` LIMIT ` + arg(p.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, [][]byte{})
}

// pointSQL returns the step visible at sequence $2 of session $1 (or, when
// $2 is 0, its last step) in one statement: the chain carries each
// ancestor's visible upper bound down, and the sequence is looked up in
// the one segment that holds it.
const pointSQL = `WITH RECURSIVE chain (id, parent, fork, lim) AS (
	SELECT id, parent_session_id, fork_sequence, last_seq FROM sessions WHERE id = $1
	UNION ALL
	SELECT s.id, s.parent_session_id, s.fork_sequence, LEAST(c.lim, c.fork)
	FROM sessions s JOIN chain c ON s.id = c.parent
), target (seq) AS (
	SELECT CASE WHEN $2::bigint > 0 THEN $2::bigint ELSE (SELECT lim FROM chain WHERE id = $1) END
)
SELECT st.body FROM chain c
CROSS JOIN target t
JOIN steps st ON st.session_id = c.id AND st.sequence = t.seq
WHERE t.seq > c.fork AND t.seq <= c.lim`

// StepGet implements store.Store.
func (s *Store) StepGet(ctx context.Context, p *store.StepGetParams) (*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || (p.ID == "" && p.SessionID == "") {
		return nil, rules.Invalid("step get needs an id, or a session id and a sequence")
	}
	if p.ID != "" {
		var body []byte
		err := s.pool.QueryRow(ctx, `SELECT body FROM steps WHERE id = $1`, p.ID).Scan(&body)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, rules.NotFound("step", p.ID)
		}
		if err != nil {
			return nil, mapErr(err)
		}
		return rules.DecodeStep(body)
	}
	if p.Sequence < 1 {
		return nil, rules.Invalid("sequence %d < 1", p.Sequence)
	}
	return s.stepAt(ctx, p.SessionID, p.Sequence)
}

// stepAt returns the step visible at seq in a session; seq 0 means the
// last one.
func (s *Store) stepAt(ctx context.Context, sessionID string, seq int64) (*steptype.Step, error) {
	var body []byte
	err := s.pool.QueryRow(ctx, pointSQL, sessionID, seq).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		what := fmt.Sprintf("step %d of session", seq)
		if seq == 0 {
			what = "last step of session"
		}
		return nil, rules.NotFound(what, sessionID)
	}
	if err != nil {
		return nil, mapErr(err)
	}
	return rules.DecodeStep(body)
}

// StepLast implements store.Store.
func (s *Store) StepLast(ctx context.Context, p *store.StepLastParams) (*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.SessionID == "" {
		return nil, rules.Invalid("session id is required")
	}
	return s.stepAt(ctx, p.SessionID, 0)
}

// StepCount implements store.Store. Sequences are gap-free, so the count is
// the session's last visible sequence.
func (s *Store) StepCount(ctx context.Context, p *store.StepCountParams) (int64, error) {
	if p == nil || p.SessionID == "" {
		return 0, rules.Invalid("session id is required")
	}
	sess, err := s.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID})
	if err != nil {
		return 0, err
	}
	return sess.LastSequence, nil
}
