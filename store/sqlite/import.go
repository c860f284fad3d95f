package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

var (
	_ store.Importer       = (*Store)(nil)
	_ store.Exporter       = (*Store)(nil)
	_ store.VectorExporter = (*Store)(nil)
)

// SessionImport implements store.Importer.
func (s *Store) SessionImport(ctx context.Context, p *store.SessionImportParams) error {
	sess, err := rules.CheckSessionImport(p)
	if err != nil {
		return err
	}
	_, err = write(s, ctx, func(tx *wtx) (struct{}, error) {
		old, err := tx.session(sess.ID)
		switch {
		case err == nil && rules.SameSession(old, sess):
			return struct{}{}, nil
		case err == nil:
			return struct{}{}, rules.ImportConflict("session", sess.ID)
		case !errors.Is(err, store.ErrNotFound):
			return struct{}{}, err
		}
		if sess.ParentSessionID != "" {
			if _, err := tx.session(sess.ParentSessionID); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, tx.insertSession(sess)
	})
	return err
}

// RunImport implements store.Importer.
func (s *Store) RunImport(ctx context.Context, p *store.RunImportParams) error {
	runs, err := rules.CheckRunImport(p)
	if err != nil {
		return err
	}
	_, err = write(s, ctx, func(tx *wtx) (struct{}, error) {
		for _, r := range runs {
			old, err := tx.run(r.ID)
			switch {
			case err == nil && rules.SameRun(old, r):
				continue
			case err == nil:
				return struct{}{}, rules.ImportConflict("run", r.ID)
			case !errors.Is(err, store.ErrNotFound):
				return struct{}{}, err
			}
			if _, err := tx.session(r.SessionID); err != nil {
				return struct{}{}, err
			}
			if err := tx.insertRun(r); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	return err
}

// StepImport implements store.Importer.
func (s *Store) StepImport(ctx context.Context, p *store.StepImportParams) error {
	steps, err := rules.CheckStepImport(p)
	if err != nil {
		return err
	}
	_, err = write(s, ctx, func(tx *wtx) (struct{}, error) {
		checked := map[string]bool{}
		for _, is := range steps {
			in := is.Step
			if !checked[in.SessionID] {
				if _, err := tx.session(in.SessionID); err != nil {
					return struct{}{}, err
				}
				checked[in.SessionID] = true
			}
			res, err := tx.st.stepInsert.ExecContext(bg, in.ID, in.SessionID, in.Sequence, in.RunID, string(in.Kind),
				string(in.Status), in.Hop, nanos(in.CreatedAt), is.Body, rules.ExpiryNanos(in),
				string(in.Role), in.Metrics.InputTokens, in.Metrics.OutputTokens, in.Metrics.CachedTokens, in.Metrics.Cost)
			if isUnique(err) {
				return struct{}{}, rules.Conflict("session %q holds another step at sequence %d", in.SessionID, in.Sequence)
			}
			if err != nil {
				return struct{}{}, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				if err != nil {
					return struct{}{}, err
				}
				tx.noteInsert(res)
				continue
			}
			var body []byte
			if err := tx.st.stepBody.QueryRowContext(bg, in.ID).Scan(&body); err != nil {
				return struct{}{}, err
			}
			if !bytes.Equal(body, is.Body) {
				return struct{}{}, rules.ImportConflict("step", in.ID)
			}
		}
		return struct{}{}, nil
	})
	return err
}

// SessionDetach implements store.Importer.
func (s *Store) SessionDetach(ctx context.Context, p *store.SessionDetachParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("session id is required")
	}
	_, err := write(s, ctx, func(tx *wtx) (struct{}, error) {
		sess, err := tx.session(p.ID)
		if err != nil || sess.ParentSessionID == "" {
			return struct{}{}, err
		}
		var n int64
		if err := tx.conn().QueryRowContext(bg, `SELECT count(*) FROM steps WHERE session_id = ? AND sequence <= ?`,
			sess.ID, sess.ForkSequence).Scan(&n); err != nil {
			return struct{}{}, err
		}
		if n != sess.ForkSequence {
			return struct{}{}, rules.Conflict("fork %q holds %d of its %d inherited steps", sess.ID, n, sess.ForkSequence)
		}
		rules.Detach(sess, p)
		_, err = tx.conn().ExecContext(bg, `UPDATE sessions SET parent_session_id = NULL, fork_sequence = 0,
			input_tokens = ?, output_tokens = ?, cost = ? WHERE id = ?`, sess.InputTokens, sess.OutputTokens, sess.Cost, sess.ID)
		if err != nil {
			return struct{}{}, err
		}
		tx.cache.putSession(sess)
		return struct{}{}, nil
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id > ? ORDER BY id LIMIT ?`, p.AfterID, limit)
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

// VectorExport implements store.VectorExporter.
func (s *Store) VectorExport(ctx context.Context, p *store.VectorExportParams) ([]*store.ExportedVector, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.SessionID == "" {
		return nil, rules.Invalid("vector export needs a session id")
	}
	limit, err := rules.ExportLimit(p.Limit, 100)
	if err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT v.embedder, v.step_id, v.vector, v.created_at
		FROM steps s JOIN step_vectors v ON v.step_id = s.id
		WHERE s.session_id = ? AND (v.step_id > ? OR (v.step_id = ? AND v.embedder > ?))
		ORDER BY v.step_id, v.embedder LIMIT ?`, p.SessionID, p.AfterStepID, p.AfterStepID, p.AfterEmbedder, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	return scanExported(rows)
}

func scanExported(rows *sql.Rows) ([]*store.ExportedVector, error) {
	defer rows.Close()
	out := []*store.ExportedVector{}
	for rows.Next() {
		var v store.ExportedVector
		var b []byte
		var created int64
		if err := rows.Scan(&v.Embedder, &v.StepID, &b, &created); err != nil {
			return nil, mapErr(err)
		}
		v.Vector = make([]float32, len(b)/4)
		vecindex.Decode(b, v.Vector)
		v.CreatedAt = fromNanos(created)
		out = append(out, &v)
	}
	return out, mapErr(rows.Err())
}
