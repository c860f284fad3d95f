package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// Step vectors are rows of step_vectors (migration 00020). SQLite has no
// vector type, so each open Store keeps an in-process copy per embedder (a
// vecindex.Index: normalized float32s in one slab, exact top-k by heap),
// loaded on the first search and kept in step with the database before each
// search: rows newer than the last one loaded are read (an indexed range
// scan, usually empty), and when vector_embedders.deletes moved (steps were
// deleted) the ids of vectors that are gone are dropped. This works the
// same for the writer and for read-only stores in other processes.

// VectorUpsert implements store.VectorStore.
func (s *Store) VectorUpsert(ctx context.Context, p *store.VectorUpsertParams) (int, error) {
	dim, err := vecindex.CheckUpsert(p)
	if err != nil {
		return 0, err
	}
	if len(p.Vectors) == 0 {
		return 0, s.usable()
	}
	now := nanos(rules.Now(p.Now))
	return write(s, ctx, func(tx *wtx) (int, error) {
		c := tx.conn()
		var stored int
		err := c.QueryRowContext(bg, `SELECT dim FROM vector_embedders WHERE name = ?`, p.Embedder).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := c.ExecContext(bg, `INSERT INTO vector_embedders (name, dim, created_at) VALUES (?, ?, ?)`, p.Embedder, dim, now); err != nil {
				return 0, err
			}
		case err != nil:
			return 0, err
		case stored != dim:
			return 0, vecindex.DimMismatch(p.Embedder, stored, dim)
		}
		// The step's filter columns are copied from its row; no row
		// copied means no such step.
		ins, err := c.PrepareContext(bg, `INSERT OR REPLACE INTO step_vectors
			(step_id, embedder, session_id, run_id, kind, step_created_at, vector, created_at)
			SELECT id, ?, session_id, run_id, kind, created_at, ?, ? FROM steps WHERE id = ?`)
		if err != nil {
			return 0, err
		}
		defer ins.Close()
		n := 0
		for _, v := range p.Vectors {
			res, err := ins.ExecContext(bg, p.Embedder, vecindex.Encode(v.Vector), now, v.StepID)
			if err != nil {
				return 0, err
			}
			if k, err := res.RowsAffected(); err != nil {
				return 0, err
			} else if k == 0 {
				if p.SkipMissing {
					continue
				}
				return 0, rules.NotFound("step", v.StepID)
			}
			n++
		}
		return n, nil
	})
}

// space returns the index of an embedder brought up to date with the
// snapshot of tx (vecindex.Spaces.Refresh), or nil when the embedder is
// unknown. The rows to load are those above the highest step_vectors.id
// loaded (Space.Mark); Seq is sqlite_sequence of step_vectors.
func (s *Store) space(ctx context.Context, tx *sql.Tx, embedder string) (*vecindex.Space, error) {
	var v vecindex.Version
	err := tx.QueryRowContext(ctx, `SELECT e.dim, e.deletes,
		coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'step_vectors'), 0)
		FROM vector_embedders e WHERE e.name = ?`, embedder).Scan(&v.Dim, &v.Deletes, &v.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kept := func() ([]string, error) {
		return queryStrings(ctx, tx, `SELECT step_id FROM step_vectors WHERE embedder = ?`, embedder)
	}
	return s.vec.Refresh(embedder, v, kept, func(sp *vecindex.Space) (*vecindex.Batch, error) {
		return loadVectors(ctx, tx, embedder, sp.Mark)
	})
}

// loadVectors reads the vectors of embedder stored after row id mark.
func loadVectors(ctx context.Context, tx *sql.Tx, embedder string, mark int64) (*vecindex.Batch, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, step_id, session_id, run_id, kind, step_created_at, vector
		FROM step_vectors WHERE embedder = ? AND id > ? ORDER BY id`, embedder, mark)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := &vecindex.Batch{Mark: mark}
	for rows.Next() {
		var e vecindex.Entry
		var blob []byte
		if err := rows.Scan(&b.Mark, &e.StepID, &e.SessionID, &e.RunID, &e.Kind, &e.Created, &blob); err != nil {
			return nil, err
		}
		b.Entries, b.Blobs = append(b.Entries, e), append(b.Blobs, blob)
	}
	return b, rows.Err()
}

// VectorSearch implements store.VectorStore.
func (s *Store) VectorSearch(ctx context.Context, p *store.VectorSearchParams) ([]*store.VectorHit, error) {
	if err := vecindex.CheckSearch(p); err != nil {
		return nil, err
	}
	var hits []*store.VectorHit
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		sp, err := s.space(ctx, tx, p.Embedder)
		if err != nil {
			return err
		}
		sessions := func() ([]string, error) {
			return queryStrings(ctx, tx, `SELECT id FROM sessions WHERE agent = ?`, p.Agent)
		}
		hits, err = vecindex.Search(sp, p, sessions, func(ids []string) (map[string]*steptype.Step, error) {
			return stepsByID(ctx, tx, ids)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// queryStrings reads one text column.
func queryStrings(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// stepsByID reads the steps of the given ids, by id.
func stepsByID(ctx context.Context, tx *sql.Tx, ids []string) (map[string]*steptype.Step, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, `SELECT body FROM steps WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, args...)
	if err != nil {
		return nil, err
	}
	bodies, err := collect(rows, nil)
	if err != nil {
		return nil, err
	}
	steps, err := decodeBodies(bodies)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*steptype.Step, len(steps))
	for _, st := range steps {
		out[st.ID] = st
	}
	return out, nil
}

// VectorMissing implements store.VectorStore.
func (s *Store) VectorMissing(ctx context.Context, p *store.VectorMissingParams) ([]*steptype.Step, error) {
	limit, err := vecindex.CheckMissing(p)
	if err != nil {
		return nil, err
	}
	var bodies [][]byte
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		kinds, args := kindFilter(p.Kinds, []any{p.AfterID})
		args = append(args, p.Embedder, limit)
		rows, err := tx.QueryContext(ctx, `SELECT body FROM steps s WHERE s.id > ? AND s.status <> 'waiting'`+kinds+`
			AND NOT EXISTS (SELECT 1 FROM step_vectors v WHERE v.step_id = s.id AND v.embedder = ?)
			ORDER BY s.id LIMIT ?`, args...)
		if err != nil {
			return err
		}
		bodies, err = collect(rows, [][]byte{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return decodeBodies(bodies)
}

// VectorCount implements store.VectorStore.
func (s *Store) VectorCount(ctx context.Context, p *store.VectorCountParams) ([]*store.VectorTotal, error) {
	if p == nil {
		p = &store.VectorCountParams{}
	}
	out := []*store.VectorTotal{}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT e.name, e.dim, (SELECT count(*) FROM step_vectors v WHERE v.embedder = e.name)
			FROM vector_embedders e WHERE ? = '' OR e.name = ? ORDER BY e.name`, p.Embedder, p.Embedder)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t store.VectorTotal
			if err := rows.Scan(&t.Embedder, &t.Dim, &t.Count); err != nil {
				return err
			}
			out = append(out, &t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SupportsVectorIndex implements store.VectorStore: SQLite searches an
// exact in-process index, not a database index.
func (s *Store) SupportsVectorIndex() bool { return false }
