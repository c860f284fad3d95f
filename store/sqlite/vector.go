package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

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

// The in-process indexes of a Store live in its vec field.

type vecState struct {
	mu     sync.Mutex // serializes refreshes
	spaces map[string]*vecSpace
}

// vecSpace is the loaded index of one embedder, as of the database
// version (seq, deletes): both only grow, so snapshots are ordered by them.
type vecSpace struct {
	ix      *vecindex.Index
	lastID  int64 // highest step_vectors.id loaded
	seq     int64 // sqlite_sequence of step_vectors when last refreshed
	deletes int64 // vector_embedders.deletes when last refreshed
}

func (s *Store) vecState() *vecState {
	s.vecOnce.Do(func() { s.vec = &vecState{spaces: make(map[string]*vecSpace)} })
	return s.vec
}

// encodeVector is the storage form of a vector.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

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
			res, err := ins.ExecContext(bg, p.Embedder, encodeVector(v.Vector), now, v.StepID)
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
// snapshot of tx, or nil when the embedder is unknown. A snapshot older than
// the index (a concurrent search refreshed it from a newer one) leaves the
// index alone: the search then skips the entries its snapshot cannot see.
func (s *Store) space(ctx context.Context, tx *sql.Tx, embedder string) (*vecSpace, error) {
	var dim int
	var seq, deletes int64
	err := tx.QueryRowContext(ctx, `SELECT e.dim, e.deletes,
		coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'step_vectors'), 0)
		FROM vector_embedders e WHERE e.name = ?`, embedder).Scan(&dim, &deletes, &seq)
	if errors.Is(err, sql.ErrNoRows) {
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
	}
	if err := sp.loadNew(ctx, tx, embedder); err != nil {
		return nil, err
	}
	sp.seq, sp.deletes = seq, deletes
	return sp, nil
}

// loadNew reads the vectors added since the last load.
func (sp *vecSpace) loadNew(ctx context.Context, tx *sql.Tx, embedder string) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, step_id, session_id, run_id, kind, step_created_at, vector
		FROM step_vectors WHERE embedder = ? AND id > ? ORDER BY id`, embedder, sp.lastID)
	if err != nil {
		return err
	}
	defer rows.Close()
	dim := sp.ix.Dim()
	var es []vecindex.Entry
	var vs [][]float32
	last := sp.lastID
	for rows.Next() {
		var e vecindex.Entry
		var blob []byte
		if err := rows.Scan(&last, &e.StepID, &e.SessionID, &e.RunID, &e.Kind, &e.Created, &blob); err != nil {
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
	sp.lastID = last
	return nil
}

// dropDeleted removes from the index the vectors no longer stored.
func (sp *vecSpace) dropDeleted(ctx context.Context, tx *sql.Tx, embedder string) error {
	rows, err := tx.QueryContext(ctx, `SELECT step_id FROM step_vectors WHERE embedder = ?`, embedder)
	if err != nil {
		return err
	}
	defer rows.Close()
	keep := make(map[string]bool, sp.ix.Len())
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		keep[id] = true
	}
	if err := rows.Err(); err != nil {
		return err
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
	err := s.readTx(ctx, func(tx *sql.Tx) error {
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
			if agentSessions, err = sessionsOf(ctx, tx, p.Agent); err != nil {
				return err
			}
		}
		f, ok := vecindex.NewFilter(p, agentSessions)
		if !ok {
			return nil
		}
		// A concurrent refresh may have added vectors newer than this
		// snapshot: their steps are not visible here; search again
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

func sessionsOf(ctx context.Context, tx *sql.Tx, agent string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM sessions WHERE agent = ?`, agent)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// stepsByID reads the steps of search results.
func stepsByID(ctx context.Context, tx *sql.Tx, res []vecindex.Result) (map[string]*steptype.Step, error) {
	out := make(map[string]*steptype.Step, len(res))
	if len(res) == 0 {
		return out, nil
	}
	args := make([]any, len(res))
	for i, r := range res {
		args[i] = r.StepID
	}
	rows, err := tx.QueryContext(ctx, `SELECT body FROM steps WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(res)), ", ")+`)`, args...)
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
