package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// Step vectors are rows of step_vectors (migration 00020) in plain
// PostgreSQL: no extension is needed. Each vector is a bytea of
// little-endian float32s (the SQLite driver's encoding), tagged with its
// embedder, whose dimension vector_embedders fixes. Searches run on an
// exact in-process index (vector_index.go), the SQLite driver's.

// VectorUpsert implements store.VectorStore. It locks the steps (FOR KEY
// SHARE, in id order: a concurrent delete waits, and a truncate that locked
// them first is waited for), then the embedder's row, whose last_seq
// numbers the vectors written: writes of one embedder commit one after the
// other, in seq order, which is what lets every index read only what is
// new (see migration 00020).
func (s *Store) VectorUpsert(ctx context.Context, p *store.VectorUpsertParams) (int, error) {
	dim, err := vecindex.CheckUpsert(p)
	if err != nil {
		return 0, err
	}
	if len(p.Vectors) == 0 {
		return 0, s.usable()
	}
	now := nanos(rules.Now(p.Now))
	ids := make([]string, len(p.Vectors))
	for i, v := range p.Vectors {
		ids[i] = v.StepID
	}
	return inTx(s, ctx, func(tx *wtx) (int, error) {
		rows, err := tx.Query(ctx, `SELECT id FROM steps WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`, ids)
		if err != nil {
			return 0, err
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return 0, err
		}
		stored := make(map[string]bool, len(found))
		for _, id := range found {
			stored[id] = true
		}
		if !p.SkipMissing {
			for _, id := range ids {
				if !stored[id] {
					return 0, rules.NotFound("step", id)
				}
			}
		}
		last, err := lockEmbedder(ctx, tx, p.Embedder, dim, now)
		if err != nil {
			return 0, err
		}
		var wids []string
		var seqs []int64
		var vecs [][]byte
		for _, v := range p.Vectors {
			if stored[v.StepID] {
				last++
				wids, seqs, vecs = append(wids, v.StepID), append(seqs, last), append(vecs, vecindex.Encode(v.Vector))
			}
		}
		if len(wids) == 0 {
			return 0, nil
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO step_vectors (step_id, embedder, dim, seq, session_id, run_id, kind, step_created_at, vector, created_at)
			SELECT u.step_id, $1, $6, u.seq, st.session_id, st.run_id, st.kind, st.created_at, u.vector, $2
			FROM unnest($3::text[], $4::bigint[], $5::bytea[]) AS u (step_id, seq, vector)
			JOIN steps st ON st.id = u.step_id
			ON CONFLICT (step_id, embedder) DO UPDATE SET seq = excluded.seq, vector = excluded.vector,
				created_at = excluded.created_at`, p.Embedder, now, wids, seqs, vecs, dim)
		b.Queue(`UPDATE vector_embedders SET last_seq = $2 WHERE name = $1`, p.Embedder, last)
		if err := tx.send(ctx, b, true); err != nil {
			return 0, err
		}
		return len(wids), nil
	})
}

// lockEmbedder locks the row of an embedder, creating it with dimension
// dim when missing, and returns its last_seq. It fails with
// store.ErrDimensionMismatch when the embedder stores another dimension.
func lockEmbedder(ctx context.Context, tx *wtx, name string, dim int, now int64) (int64, error) {
	var stored int
	var last int64
	err := tx.QueryRow(ctx, `SELECT dim, last_seq FROM vector_embedders WHERE name = $1 FOR NO KEY UPDATE`, name).Scan(&stored, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		// No conflict target: a concurrent first upsert may collide on
		// name or on (name, dim), and either way this one locks its row.
		tag, err := tx.Exec(ctx, `INSERT INTO vector_embedders (name, dim, created_at) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, name, dim, now)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 0 {
			return 0, errRaced // created by a concurrent first upsert: lock it
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if stored != dim {
		return 0, vecindex.DimMismatch(name, stored, dim)
	}
	return last, nil
}

// VectorMissing implements store.VectorStore.
func (s *Store) VectorMissing(ctx context.Context, p *store.VectorMissingParams) ([]*steptype.Step, error) {
	limit, err := vecindex.CheckMissing(p)
	if err != nil {
		return nil, err
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	q := `SELECT body FROM steps s WHERE s.id > $1 AND s.status <> 'waiting'
		AND NOT EXISTS (SELECT 1 FROM step_vectors v WHERE v.step_id = s.id AND v.embedder = $2)`
	args := []any{p.AfterID, p.Embedder, limit}
	if len(p.Kinds) > 0 {
		q += ` AND s.kind = ANY($4)`
		args = append(args, kindFilter(p.Kinds))
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY s.id LIMIT $3`, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	bodies, err := collect(rows, [][]byte{})
	if err != nil {
		return nil, mapErr(err)
	}
	return decodeBodies(bodies)
}

// VectorCount implements store.VectorStore.
func (s *Store) VectorCount(ctx context.Context, p *store.VectorCountParams) ([]*store.VectorTotal, error) {
	if p == nil {
		p = &store.VectorCountParams{}
	}
	return queryAll(s, ctx, func(row sqlrow.Scanner) (*store.VectorTotal, error) {
		var t store.VectorTotal
		return &t, row.Scan(&t.Embedder, &t.Dim, &t.Count)
	}, `SELECT e.name, e.dim, (SELECT count(*) FROM step_vectors v WHERE v.embedder = e.name)
		FROM vector_embedders e WHERE $1 = '' OR e.name = $1 ORDER BY e.name`, p.Embedder)
}

// SupportsVectorIndex implements store.VectorStore: PostgreSQL searches an
// exact in-process index, as SQLite does, not an index in the database.
func (s *Store) SupportsVectorIndex() bool { return false }
