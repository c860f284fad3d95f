package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

type vecState struct {
	mu     sync.Mutex // serializes refreshes
	spaces map[string]*vecSpace
}

// vecSpace is the loaded index of one embedder, as of the database
// version (seq, deletes): both only grow, so snapshots are ordered by them.
type vecSpace struct {
	ix      *vecindex.Index
	seq     int64 // vector_embedders.last_seq loaded
	deletes int64 // vector_embedders.deletes when last refreshed
	loaded  int64 // rows read by loadNew since the index was created
}

func (s *Store) vecState() *vecState {
	s.vecOnce.Do(func() { s.vec = &vecState{spaces: make(map[string]*vecSpace)} })
	return s.vec
}

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
// snapshot of tx, or nil when the embedder is unknown. A snapshot older than
// the index (a concurrent search refreshed it from a newer one) leaves the
// index alone: the search then skips the entries its snapshot cannot see.
func (s *Store) space(ctx context.Context, tx pgx.Tx, embedder string) (*vecSpace, error) {
	var dim int
	var seq, deletes int64
	err := tx.QueryRow(ctx, `SELECT dim, last_seq, deletes FROM vector_embedders WHERE name = $1`, embedder).Scan(&dim, &seq, &deletes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := s.vecState()
	st.mu.Lock()
	defer st.mu.Unlock()
	sp := st.spaces[embedder]
	if sp == nil || sp.ix.Dim() != dim {
		sp = &vecSpace{ix: vecindex.New(dim), deletes: deletes}
		st.spaces[embedder] = sp
	}
	if seq < sp.seq || deletes < sp.deletes {
		return sp, nil
	}
	if deletes != sp.deletes {
		if err := sp.dropDeleted(ctx, tx, embedder); err != nil {
			return nil, err
		}
		sp.deletes = deletes
	}
	if seq != sp.seq {
		if err := sp.loadNew(ctx, tx, embedder, seq); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// loadNew reads the vectors written since the last load, up to seq.
func (sp *vecSpace) loadNew(ctx context.Context, tx pgx.Tx, embedder string, seq int64) error {
	rows, err := tx.Query(ctx, `SELECT step_id, session_id, run_id, kind, step_created_at, vector
		FROM step_vectors WHERE embedder = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`, embedder, sp.seq, seq)
	if err != nil {
		return err
	}
	defer rows.Close()
	dim := sp.ix.Dim()
	var es []vecindex.Entry
	var vs [][]float32
	var blob []byte
	for rows.Next() {
		var e vecindex.Entry
		if err := rows.Scan(&e.StepID, &e.SessionID, &e.RunID, &e.Kind, &e.Created, &blob); err != nil {
			return err
		}
		if len(blob) != 4*dim {
			return fmt.Errorf("%w: vector of step %q for %q has %d bytes, want %d", store.ErrCorrupt, e.StepID, embedder, len(blob), 4*dim)
		}
		v := make([]float32, dim)
		decodeVector(blob, v)
		es, vs = append(es, e), append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	sp.ix.PutAll(es, vs)
	sp.seq, sp.loaded = seq, sp.loaded+int64(len(es))
	return nil
}

// dropDeleted removes from the index the vectors no longer stored.
func (sp *vecSpace) dropDeleted(ctx context.Context, tx pgx.Tx, embedder string) error {
	rows, err := tx.Query(ctx, `SELECT step_id FROM step_vectors WHERE embedder = $1`, embedder)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	sp.ix.Delete(sp.ix.IDs(func(id string) bool { return !keep[id] })...)
	return nil
}

// VectorSearch implements store.VectorStore.
func (s *Store) VectorSearch(ctx context.Context, p *store.VectorSearchParams) ([]*store.VectorHit, error) {
	if err := vecindex.CheckSearch(p); err != nil {
		return nil, err
	}
	hits := []*store.VectorHit{}
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		sp, err := s.space(ctx, tx, p.Embedder)
		if err != nil {
			return err
		}
		if sp == nil || sp.ix.Len() == 0 {
			return vecindex.NoVectors(p.Embedder)
		}
		if sp.ix.Dim() != len(p.Vector) {
			return vecindex.DimMismatch(p.Embedder, sp.ix.Dim(), len(p.Vector))
		}
		var agentSessions []string
		if p.Agent != "" {
			rows, err := tx.Query(ctx, `SELECT id FROM sessions WHERE agent = $1`, p.Agent)
			if err != nil {
				return err
			}
			if agentSessions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
		}
		f, ok := vecindex.NewFilter(p, agentSessions)
		if !ok {
			return nil
		}
		// A concurrent refresh may have added vectors newer than this
		// snapshot: their steps may not be visible here; search again
		// without them.
		skip := map[string]bool{}
		for {
			res := sp.ix.Search(p.Vector, p.K, p.MaxDistance, f.Skip(skip))
			found, err := stepsByID(ctx, tx, res)
			if err != nil {
				return err
			}
			hits = hits[:0]
			for _, r := range res {
				if st := found[r.StepID]; st != nil {
					hits = append(hits, &store.VectorHit{Step: st, Distance: r.Distance})
				} else {
					skip[r.StepID] = true
				}
			}
			if len(hits) == len(res) || len(skip) > 4*p.K {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// stepsByID reads the steps of search results.
func stepsByID(ctx context.Context, tx pgx.Tx, res []vecindex.Result) (map[string]*steptype.Step, error) {
	out := make(map[string]*steptype.Step, len(res))
	if len(res) == 0 {
		return out, nil
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.StepID
	}
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
	for _, st := range steps {
		out[st.ID] = st
	}
	return out, nil
}
