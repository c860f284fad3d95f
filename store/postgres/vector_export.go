package postgres

import (
	"context"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// VectorExport implements store.VectorExporter: the vectors of the steps
// stored in a session, through the steps' (session_id, sequence) index
// and step_vectors' primary key.
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
	rows, err := s.pool.Query(ctx, `SELECT v.embedder, v.step_id, v.vector, v.created_at
		FROM steps s JOIN step_vectors v ON v.step_id = s.id
		WHERE s.session_id = $1 AND (v.step_id, v.embedder) > ($2, $3)
		ORDER BY v.step_id, v.embedder LIMIT $4`, p.SessionID, p.AfterStepID, p.AfterEmbedder, limit)
	if err != nil {
		return nil, mapErr(err)
	}
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
