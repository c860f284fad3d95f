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

const sessionInsertSQL = `INSERT INTO sessions (id, agent, title, parent_session_id, fork_sequence, last_seq,
	input_tokens, output_tokens, cost, metadata, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// SessionCreate implements store.Store.
func (s *Store) SessionCreate(ctx context.Context, p *store.SessionCreateParams) (*steptype.Session, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	sess, err := rules.NewSession(p)
	if err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, sessionInsertSQL, sessionArgs(sess)...); err != nil {
		if pgCode(err) == codeUniqueViolation {
			return nil, rules.Conflict("session %q already exists", sess.ID)
		}
		return nil, mapErr(err)
	}
	return sess, nil
}

// SessionFork implements store.Store. The parent row is share-locked, so
// a concurrent truncation of the parent either sees the fork or happens
// before it is checked.
func (s *Store) SessionFork(ctx context.Context, p *store.SessionForkParams) (*steptype.Session, error) {
	if err := rules.CheckFork(p); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) (*steptype.Session, error) {
		parent, err := lockSession(ctx, tx, p.ParentID, "FOR SHARE")
		if err != nil {
			return nil, err
		}
		f, err := rules.NewFork(p, parent)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, sessionInsertSQL, sessionArgs(f)...); err != nil {
			if pgCode(err) == codeUniqueViolation {
				return nil, rules.Conflict("session %q already exists", f.ID)
			}
			return nil, err
		}
		return f, nil
	})
}

// lockSession reads one session row with a row lock ("FOR SHARE", "FOR
// NO KEY UPDATE", "FOR UPDATE").
func lockSession(ctx context.Context, tx *wtx, id, lock string) (*steptype.Session, error) {
	sess, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1 `+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.NotFound("session", id)
	}
	return sess, err
}

// forks returns the fork sequences of the direct forks of a session.
func forks(ctx context.Context, tx *wtx, id string) ([]int64, error) {
	rows, err := tx.Query(ctx, `SELECT fork_sequence FROM sessions WHERE parent_session_id = $1`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// SessionDelete implements store.Store. Steps and runs go with the session
// (ON DELETE CASCADE).
func (s *Store) SessionDelete(ctx context.Context, p *store.SessionDeleteParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("session id is required")
	}
	_, err := inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		if _, err := lockSession(ctx, tx, p.ID, "FOR UPDATE"); err != nil {
			return struct{}{}, err
		}
		fs, err := forks(ctx, tx, p.ID)
		if err != nil {
			return struct{}{}, err
		}
		if len(fs) > 0 {
			return struct{}{}, rules.Conflict("session %q has %d fork(s)", p.ID, len(fs))
		}
		_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, p.ID)
		return struct{}{}, err
	})
	return err
}

// SessionGet implements store.Store.
func (s *Store) SessionGet(ctx context.Context, p *store.SessionGetParams) (*steptype.Session, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("session id is required")
	}
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, p.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.NotFound("session", p.ID)
	}
	return sess, mapErr(err)
}

// lowerASCII lowers the ASCII letters of a text column only, like
// rules.LowerASCII, whatever the database's collation.
func lowerASCII(col string) string {
	return `translate(` + col + `, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`
}

// SessionList implements store.Store.
func (s *Store) SessionList(ctx context.Context, p *store.SessionListParams) (*store.SessionPage, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	limit, cur, err := rules.CheckSessionList(p)
	if err != nil {
		return nil, err
	}
	terms, err := rules.MetadataFilter(p)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	for _, t := range terms {
		// jsonb equality: 1 equals 1.0, never "1" or true.
		where = append(where, fmt.Sprintf("convert_from(metadata, 'UTF8')::jsonb -> %s = %s::jsonb", arg(t.Key), arg(string(t.JSON))))
	}
	if p.Agent != "" {
		where = append(where, "agent = "+arg(p.Agent))
	}
	if p.ParentID != "" {
		where = append(where, "parent_session_id = "+arg(p.ParentID))
	}
	if p.Query != "" {
		q := arg(rules.LowerASCII(p.Query))
		where = append(where, fmt.Sprintf("(strpos(%s, %s) > 0 OR strpos(%s, %s) > 0 OR strpos(%s, %s) > 0)",
			lowerASCII("id"), q, lowerASCII("title"), q, lowerASCII("agent"), q))
	}
	if cur != nil {
		n, id := arg(nanos(cur.UpdatedAt)), arg(cur.ID)
		// The activity bound lets the scan start at the cursor's second
		// in sessions_activity_second (migration 00085); the exact
		// condition follows.
		where = append(where, fmt.Sprintf("activity <= %s::bigint / 1000000000 AND (updated_at < %s OR (updated_at = %s AND id < %s))", n, n, n, id))
	}
	q := `SELECT ` + sessionCols + ` FROM sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	// activity (updated_at's second) first: the same order, read from
	// the index that keeps the per-step session update HOT.
	q += ` ORDER BY activity DESC, updated_at DESC, id DESC LIMIT ` + arg(limit+1)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	page := &store.SessionPage{Sessions: []*steptype.Session{}}
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		page.Sessions = append(page.Sessions, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	if len(page.Sessions) > limit {
		page.Sessions = page.Sessions[:limit]
		last := page.Sessions[limit-1]
		page.Next = rules.EncodeCursor(rules.SessionCursor{UpdatedAt: last.UpdatedAt, ID: last.ID})
	}
	return page, nil
}

// SessionUpdate implements store.Store. The row is locked, so concurrent
// updates merge one after the other.
func (s *Store) SessionUpdate(ctx context.Context, p *store.SessionUpdateParams) (*steptype.Session, error) {
	if err := rules.CheckSessionUpdate(p); err != nil {
		return nil, err
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) (*steptype.Session, error) {
		cur, err := lockSession(ctx, tx, p.ID, "FOR NO KEY UPDATE")
		if err != nil {
			return nil, err
		}
		u, err := rules.UpdateSession(cur, p)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET metadata = $1, title = $2, updated_at = $3 WHERE id = $4`, []byte(u.Metadata), u.Title, nanos(u.UpdatedAt), u.ID)
		return u, err
	})
}
