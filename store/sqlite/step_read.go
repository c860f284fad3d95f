package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// chainSQL returns a session and its ancestors, the session first.
const chainSQL = `WITH RECURSIVE chain (id, parent, fork, last, depth) AS (
	SELECT id, parent_session_id, fork_sequence, last_seq, 0 FROM sessions WHERE id = ?
	UNION ALL
	SELECT s.id, s.parent_session_id, s.fork_sequence, s.last_seq, c.depth + 1
	FROM sessions s JOIN chain c ON s.id = c.parent
) SELECT id, parent, fork, last FROM chain ORDER BY depth`

// lineage reads the fork chain of a session inside a read transaction.
func lineage(ctx context.Context, tx *sql.Tx, sessionID string) ([]rules.Link, error) {
	rows, err := tx.QueryContext(ctx, chainSQL, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var links []rules.Link
	for rows.Next() {
		var l rules.Link
		var parent sql.NullString
		if err := rows.Scan(&l.SessionID, &parent, &l.ForkSequence, &l.LastSequence); err != nil {
			return nil, err
		}
		l.ParentSessionID = parent.String
		links = append(links, l)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(links) == 0 {
		return nil, rules.NotFound("session", sessionID)
	}
	return links, nil
}

// readTx runs fn in one read transaction, so multi-query reads (lineage,
// then segments) see one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback()
	return mapErr(fn(tx))
}

func collect(rows *sql.Rows, bodies [][]byte) ([][]byte, error) {
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		bodies = append(bodies, b)
	}
	return bodies, rows.Err()
}

func kindFilter(kinds []steptype.Kind, args []any) (string, []any) {
	if len(kinds) == 0 {
		return "", args
	}
	for _, k := range kinds {
		args = append(args, string(k))
	}
	return " AND kind IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(kinds)), ", ") + ")", args
}

// StepList implements store.Store.
func (s *Store) StepList(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	bodies, err := s.stepBodies(ctx, p)
	if err != nil {
		return nil, err
	}
	return decodeBodies(bodies)
}

// stepBodies reads the stored bodies StepList decodes.
func (s *Store) stepBodies(ctx context.Context, p *store.StepListParams) ([][]byte, error) {
	follow, err := rules.CheckList(p)
	if err != nil {
		return nil, err
	}
	var bodies [][]byte
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		var chain []rules.Link
		if p.SessionID != "" {
			if chain, err = lineage(ctx, tx, p.SessionID); err != nil {
				return err
			}
		}
		if p.EndSeq > 0 && p.EndSeq < p.StartSeq {
			return nil
		}
		if follow {
			bodies, err = listLineage(ctx, tx, chain, p)
		} else {
			bodies, err = listFiltered(ctx, tx, p)
		}
		return err
	})
	return bodies, err
}

// listLineage reads the segments of a session's lineage in order.
func listLineage(ctx context.Context, tx *sql.Tx, chain []rules.Link, p *store.StepListParams) ([][]byte, error) {
	segs := rules.Segments(chain, p.StartSeq, p.EndSeq)
	order := "ASC"
	if p.Desc {
		order = "DESC"
		for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
			segs[i], segs[j] = segs[j], segs[i]
		}
	}
	bodies := [][]byte{}
	for _, seg := range segs {
		args := []any{seg.SessionID, seg.From, seg.To}
		kinds, args := kindFilter(p.Kinds, args)
		q := `SELECT body FROM steps WHERE session_id = ? AND sequence BETWEEN ? AND ?` + kinds + ` ORDER BY sequence ` + order
		if p.Limit > 0 {
			q += ` LIMIT ?`
			args = append(args, p.Limit-len(bodies))
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		if bodies, err = collect(rows, bodies); err != nil {
			return nil, err
		}
		if p.Limit > 0 && len(bodies) >= p.Limit {
			break
		}
	}
	return bodies, nil
}

// listFiltered reads steps by run and/or status, without lineage.
func listFiltered(ctx context.Context, tx *sql.Tx, p *store.StepListParams) ([][]byte, error) {
	where := []string{"1 = 1"}
	var args []any
	if p.SessionID != "" {
		where, args = append(where, "session_id = ?"), append(args, p.SessionID)
	}
	if p.RunID != "" {
		// "run_id <> ''" lets SQLite use the partial index steps_run
		// (without it every run query scans the steps table).
		where, args = append(where, "run_id = ?", "run_id <> ''"), append(args, p.RunID)
	}
	if p.Status != "" {
		// Inlined (CheckList allows known statuses only) so the partial
		// index on waiting steps applies.
		where = append(where, fmt.Sprintf("status = '%s'", p.Status))
	}
	if p.StartSeq > 0 {
		where, args = append(where, "sequence >= ?"), append(args, p.StartSeq)
	}
	if p.EndSeq > 0 {
		where, args = append(where, "sequence <= ?"), append(args, p.EndSeq)
	}
	kinds, args := kindFilter(p.Kinds, args)
	order := "ASC"
	if p.Desc {
		order = "DESC"
	}
	q := `SELECT body FROM steps WHERE ` + strings.Join(where, " AND ") + kinds +
		` ORDER BY sequence ` + order + `, id ` + order
	if p.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, p.Limit)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, [][]byte{})
}

// StepGet implements store.Store.
func (s *Store) StepGet(ctx context.Context, p *store.StepGetParams) (*steptype.Step, error) {
	if p == nil || (p.ID == "" && p.SessionID == "") {
		return nil, rules.Invalid("step get needs an id, or a session id and a sequence")
	}
	if p.ID != "" {
		if err := s.usable(); err != nil {
			return nil, err
		}
		var body []byte
		err := s.rdb.QueryRowContext(ctx, `SELECT body FROM steps WHERE id = ?`, p.ID).Scan(&body)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, rules.NotFound("step", p.ID)
		}
		if err != nil {
			return nil, mapErr(err)
		}
		return rules.DecodeStep(body)
	}
	return s.stepAt(ctx, p.SessionID, p.Sequence, false)
}

// stepAt returns the step visible at seq in a session, or, with last, the
// last visible step.
func (s *Store) stepAt(ctx context.Context, sessionID string, seq int64, last bool) (*steptype.Step, error) {
	if !last && seq < 1 {
		return nil, rules.Invalid("sequence %d < 1", seq)
	}
	var body []byte
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		chain, err := lineage(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if last {
			seq = chain[0].LastSequence
		}
		segs := rules.Segments(chain, seq, seq)
		if seq < 1 || len(segs) == 0 {
			return rules.NotFound(fmt.Sprintf("step %d of session", seq), sessionID)
		}
		return tx.QueryRowContext(ctx, `SELECT body FROM steps WHERE session_id = ? AND sequence = ?`,
			segs[0].SessionID, seq).Scan(&body)
	})
	if err != nil {
		return nil, err
	}
	return rules.DecodeStep(body)
}

// StepLast implements store.Store.
func (s *Store) StepLast(ctx context.Context, p *store.StepLastParams) (*steptype.Step, error) {
	if p == nil || p.SessionID == "" {
		return nil, rules.Invalid("session id is required")
	}
	return s.stepAt(ctx, p.SessionID, 0, true)
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
