package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// SessionCreate implements store.Store.
func (s *Store) SessionCreate(ctx context.Context, p *store.SessionCreateParams) (*steptype.Session, error) {
	sess, err := rules.NewSession(p)
	if err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*steptype.Session, error) {
		return sess, tx.insertSession(sess)
	})
}

// SessionFork implements store.Store.
func (s *Store) SessionFork(ctx context.Context, p *store.SessionForkParams) (*steptype.Session, error) {
	if err := rules.CheckFork(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*steptype.Session, error) {
		parent, err := tx.session(p.ParentID)
		if err != nil {
			return nil, err
		}
		f, err := rules.NewFork(p, parent)
		if err != nil {
			return nil, err
		}
		return f, tx.insertSession(f)
	})
}

// SessionDelete implements store.Store. Steps and runs go with the session
// (ON DELETE CASCADE).
func (s *Store) SessionDelete(ctx context.Context, p *store.SessionDeleteParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("session id is required")
	}
	_, err := write(s, ctx, func(tx *wtx) (struct{}, error) {
		if _, err := tx.session(p.ID); err != nil {
			return struct{}{}, err
		}
		forks, err := tx.forks(p.ID)
		if err != nil {
			return struct{}{}, err
		}
		if len(forks) > 0 {
			return struct{}{}, rules.Conflict("session %q has %d fork(s)", p.ID, len(forks))
		}
		tx.cache.dropSession(p.ID)
		return struct{}{}, execTx(tx, `DELETE FROM sessions WHERE id = ?`, p.ID)
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
	sess, err := scanSession(s.rdb.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("session", p.ID)
	}
	return sess, mapErr(err)
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
	for _, t := range terms {
		w, a := metadataWhere(t)
		where, args = append(where, w), append(args, a...)
	}
	if p.Agent != "" {
		where, args = append(where, "agent = ?"), append(args, p.Agent)
	}
	if p.ParentID != "" {
		where, args = append(where, "parent_session_id = ?"), append(args, p.ParentID)
	}
	if p.Query != "" {
		q := rules.LowerASCII(p.Query)
		where = append(where, "(instr(lower(id), ?) > 0 OR instr(lower(title), ?) > 0 OR instr(lower(agent), ?) > 0)")
		args = append(args, q, q, q)
	}
	if cur != nil {
		// The activity bound starts the scan at the cursor's second in
		// sessions_activity_second; the rest is exact.
		n := nanos(cur.UpdatedAt)
		where = append(where, "activity <= ? / 1000000000 AND (updated_at < ? OR (updated_at = ? AND id < ?))")
		args = append(args, n, n, n, cur.ID)
	}
	q := `SELECT ` + sessionCols + ` FROM sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	// activity (updated_at's second, migration 00200) first: the same
	// order, read from sessions_activity_second, the sessions of one
	// second sorted as read.
	q += ` ORDER BY activity DESC, updated_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
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

// execTx runs an unprepared statement on the writer connection; for rare
// writes (delete, truncate) that are not worth a prepared statement.
func execTx(tx *wtx, query string, args ...any) error {
	_, err := tx.conn().ExecContext(bg, query, args...)
	return err
}

// SessionUpdate implements store.Store.
func (s *Store) SessionUpdate(ctx context.Context, p *store.SessionUpdateParams) (*steptype.Session, error) {
	if err := rules.CheckSessionUpdate(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*steptype.Session, error) {
		cur, err := tx.session(p.ID)
		if err != nil {
			return nil, err
		}
		u, err := rules.UpdateSession(cur, p)
		if err != nil {
			return nil, err
		}
		if err := execTx(tx, `UPDATE sessions SET metadata = ?, title = ?, updated_at = ? WHERE id = ?`, blob(u.Metadata), u.Title, nanos(u.UpdatedAt), u.ID); err != nil {
			return nil, err
		}
		tx.cache.putSession(u)
		return u, nil
	})
}

// metadataWhere is the condition of one term of a metadata filter: the
// session's metadata, a JSON object, has the key with that value.
func metadataWhere(t rules.MetadataTerm) (string, []any) {
	const each = `CASE WHEN json_valid(CAST(metadata AS TEXT)) THEN EXISTS (SELECT 1 FROM json_each(CAST(metadata AS TEXT)) m WHERE m.key = ? AND `
	switch t.Type {
	case "text":
		return each + `m.type = 'text' AND m.atom = ?) ELSE 0 END`, []any{t.Key, t.Text}
	case "number":
		return each + `m.type IN ('integer', 'real') AND m.atom = ?) ELSE 0 END`, []any{t.Key, t.Number}
	default: // true, false, null
		return each + `m.type = ?) ELSE 0 END`, []any{t.Key, t.Type}
	}
}
