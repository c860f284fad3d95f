package postgres

import (
	"bytes"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

var (
	_ store.Importer = (*Store)(nil)
	_ store.Exporter = (*Store)(nil)
)

// SessionImport implements store.Importer.
func (s *Store) SessionImport(ctx context.Context, p *store.SessionImportParams) error {
	sess, err := rules.CheckSessionImport(p)
	if err != nil {
		return err
	}
	_, err = inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		if sess.ParentSessionID != "" {
			if _, err := lockSession(ctx, tx, sess.ParentSessionID, "FOR SHARE"); err != nil {
				return struct{}{}, err
			}
		}
		tag, err := tx.Exec(ctx, sessionInsertSQL+` ON CONFLICT (id) DO NOTHING`, sessionArgs(sess)...)
		if err != nil || tag.RowsAffected() == 1 {
			return struct{}{}, err
		}
		old, err := lockSession(ctx, tx, sess.ID, "FOR SHARE")
		if err != nil {
			return struct{}{}, err
		}
		if !rules.SameSession(old, sess) {
			return struct{}{}, rules.ImportConflict("session", sess.ID)
		}
		return struct{}{}, nil
	})
	return err
}

// RunImport implements store.Importer.
func (s *Store) RunImport(ctx context.Context, p *store.RunImportParams) error {
	runs, err := rules.CheckRunImport(p)
	if err != nil {
		return err
	}
	_, err = inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		var c changes // a server on the destination learns of a queued or waiting run at once
		for _, r := range runs {
			args, err := runArgs(r)
			if err != nil {
				return struct{}{}, err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO runs (`+sqlrow.RunCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
				$11, $12, $13, $14, $15, $16, $17, $18, $19) ON CONFLICT (id) DO NOTHING`, args...)
			if pgCode(err) == codeForeignKeyViolation {
				return struct{}{}, rules.NotFound("session", r.SessionID)
			}
			if err != nil {
				return struct{}{}, err
			}
			if tag.RowsAffected() == 1 {
				c.run(steptype.RunRunning, r)
				continue
			}
			old, err := sqlrow.ScanRun(tx.QueryRow(ctx, `SELECT `+sqlrow.RunCols+` FROM runs WHERE id = $1`, r.ID))
			if err != nil {
				return struct{}{}, err
			}
			if !rules.SameRun(old, r) {
				return struct{}{}, rules.ImportConflict("run", r.ID)
			}
		}
		return struct{}{}, notify(ctx, tx, s.changesChannel(), &c)
	})
	return err
}

// StepImport implements store.Importer: one multi-row insert, then the
// bodies of the ids that were stored already are compared.
func (s *Store) StepImport(ctx context.Context, p *store.StepImportParams) error {
	steps, err := rules.CheckStepImport(p)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		return s.usable()
	}
	var c stepColumns
	want := make(map[string][]byte, len(steps))
	for _, is := range steps {
		c.add(is.Step, is.Step.Sequence, is.Body)
		want[is.Step.ID] = is.Body
	}
	_, err = inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		// The sessions' row locks, as every writer of a session's steps
		// holds them (in id order): the fold of its totals (migration
		// 00100) reads the steps above its watermark under that lock.
		// They are also the check that the sessions exist (migration
		// 00125 dropped the steps' foreign key).
		locked, err := tx.Query(ctx, `SELECT id FROM sessions WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, c.sessions)
		if err != nil {
			return struct{}{}, err
		}
		found, err := pgx.CollectRows(locked, pgx.RowTo[string])
		if err != nil {
			return struct{}{}, err
		}
		for _, sid := range c.sessions {
			if _, ok := slices.BinarySearch(found, sid); !ok {
				return struct{}{}, rules.NotFound("session", sid)
			}
		}
		rows, err := tx.Query(ctx, stepInsertSQL+` ON CONFLICT (id) DO NOTHING RETURNING id`, c.args()...)
		if err != nil {
			return struct{}{}, err
		}
		inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
		switch pgCode(err) {
		case codeUniqueViolation:
			return struct{}{}, rules.Conflict("a session holds another step at a sequence being imported")
		}
		if err != nil {
			return struct{}{}, err
		}
		// The totals of the steps inserted (migration 00120).
		if len(inserted) > 0 {
			if _, err := tx.Exec(ctx, `SELECT steps_inserted($1)`, inserted); err != nil {
				return struct{}{}, err
			}
		}
		var c changes
		last := map[string]int64{}
		for _, is := range steps {
			last[is.Step.SessionID] = max(last[is.Step.SessionID], is.Step.Sequence)
		}
		for sid, seq := range last {
			c.step(sid, seq)
		}
		if err := notify(ctx, tx, s.changesChannel(), &c); err != nil || len(inserted) == len(steps) {
			return struct{}{}, err
		}
		for _, id := range inserted {
			delete(want, id)
		}
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		rows, err = tx.Query(ctx, `SELECT id, body FROM steps WHERE id = ANY($1)`, ids)
		if err != nil {
			return struct{}{}, err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var body []byte
			if err := rows.Scan(&id, &body); err != nil {
				return struct{}{}, err
			}
			if !bytes.Equal(body, want[id]) {
				return struct{}{}, rules.ImportConflict("step", id)
			}
		}
		return struct{}{}, rows.Err()
	})
	return err
}

// SessionDetach implements store.Importer.
func (s *Store) SessionDetach(ctx context.Context, p *store.SessionDetachParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("session id is required")
	}
	_, err := inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		sess, err := lockSession(ctx, tx, p.ID, "FOR NO KEY UPDATE")
		if err != nil || sess.ParentSessionID == "" {
			return struct{}{}, err
		}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM steps WHERE session_id = $1 AND sequence <= $2`,
			sess.ID, sess.ForkSequence).Scan(&n); err != nil {
			return struct{}{}, err
		}
		if n != sess.ForkSequence {
			return struct{}{}, rules.Conflict("fork %q holds %d of its %d inherited steps", sess.ID, n, sess.ForkSequence)
		}
		rules.Detach(sess, p)
		_, err = tx.Exec(ctx, `UPDATE sessions SET parent_session_id = NULL, fork_sequence = 0,
			input_tokens = $1, output_tokens = $2, cost = $3 WHERE id = $4`, sess.InputTokens, sess.OutputTokens, sess.Cost, sess.ID)
		return struct{}{}, err
	})
	return err
}

// SessionExport implements store.Exporter.
func (s *Store) SessionExport(ctx context.Context, p *store.SessionExportParams) ([]*steptype.Session, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil {
		p = &store.SessionExportParams{}
	}
	limit, err := rules.ExportLimit(p.Limit, 100)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id > $1 ORDER BY id LIMIT $2`, p.AfterID, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []*steptype.Session{}
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, sess)
	}
	return out, mapErr(rows.Err())
}

// notify publishes the changes of an import in its transaction, as every
// write that commits steps or changes a run's status does.
func notify(ctx context.Context, tx *wtx, channel string, c *changes) error {
	if channel == "" {
		return nil
	}
	for _, p := range c.payloads {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, p); err != nil {
			return err
		}
	}
	return nil
}
