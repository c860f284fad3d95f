package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// Each open Store keeps an in-process copy of the vectors of each embedder
// it searched (a vecindex.Index: normalized float32s in one slab, exact
// top-k by heap), loaded on the first search and brought up to date at the
// start of each search, in the search's REPEATABLE READ snapshot:
//
//   - new and replaced vectors, written by any instance: the rows with
//     seq > the last seq loaded (an index range scan, skipped outright when
//     the embedder's last_seq has not moved). Writes of one embedder
//     commit in seq order (VectorUpsert), so a row committed late never
//     hides below the mark;
//   - deleted vectors (steps truncated, sessions deleted or pruned): when
//     the embedder's deletes counter moved, the step ids still stored are
//     read and the others dropped.
//
// So N instances behind a load balancer each hold the same index, and each
// pays only for what changed since its last search.

// readTx runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot
// for the index refresh and the step rows of the results.
func (s *Store) readTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return mapErr(err)
	}
	return mapErr(tx.Commit(ctx))
}

// space returns the index of an embedder brought up to date with the
// snapshot of tx (vecindex.Spaces.Refresh), or nil when the embedder is
// unknown. Seq is vector_embedders.last_seq: the rows to load are those
// with a seq above the space's, up to it.
func (s *Store) space(ctx context.Context, tx pgx.Tx, embedder string) (*vecindex.Space, error) {
	var v vecindex.Version
	err := tx.QueryRow(ctx, `SELECT dim, last_seq, deletes FROM vector_embedders WHERE name = $1`, embedder).Scan(&v.Dim, &v.Seq, &v.Deletes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kept := func() ([]string, error) {
		rows, err := tx.Query(ctx, `SELECT step_id FROM step_vectors WHERE embedder = $1`, embedder)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	return s.vec.Refresh(embedder, v, kept, func(sp *vecindex.Space) (*vecindex.Batch, error) {
		return loadVectors(ctx, tx, embedder, sp.Seq, v.Seq)
	})
}

// loadVectors reads the vectors of embedder written with a seq in
// (from, to].
func loadVectors(ctx context.Context, tx pgx.Tx, embedder string, from, to int64) (*vecindex.Batch, error) {
	rows, err := tx.Query(ctx, `SELECT step_id, session_id, run_id, kind, step_created_at, vector
		FROM step_vectors WHERE embedder = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`, embedder, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := &vecindex.Batch{}
	for rows.Next() {
		var e vecindex.Entry
		var blob []byte
		if err := rows.Scan(&e.StepID, &e.SessionID, &e.RunID, &e.Kind, &e.Created, &blob); err != nil {
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
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		sp, err := s.space(ctx, tx, p.Embedder)
		if err != nil {
			return err
		}
		sessions := func() ([]string, error) {
			rows, err := tx.Query(ctx, `SELECT id FROM sessions WHERE agent = $1`, p.Agent)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
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

// stepsByID reads the steps of the given ids, by id.
func stepsByID(ctx context.Context, tx pgx.Tx, ids []string) (map[string]*steptype.Step, error) {
	rows, err := tx.Query(ctx, `SELECT body FROM steps WHERE id = ANY($1)`, ids)
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
