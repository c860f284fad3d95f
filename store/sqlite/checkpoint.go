package sqlite

import (
	"context"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// checkpointPutSQL inserts a checkpoint only while its step is stored: a
// checkpoint taken from a read that a truncation overtook is skipped.
const checkpointPutSQL = `INSERT INTO context_checkpoints (session_id, sequence, step_id, messages, tokens, state)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM steps WHERE id = ?3 AND session_id = ?1 AND sequence = ?2)
	ON CONFLICT (session_id, sequence) DO UPDATE SET step_id = excluded.step_id, messages = excluded.messages,
	tokens = excluded.tokens, state = excluded.state`

// ContextCheckpointPut implements store.ContextCheckpointStore.
func (s *Store) ContextCheckpointPut(ctx context.Context, p *store.ContextCheckpointPutParams) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := rules.CheckCheckpoints(p); err != nil {
		return err
	}
	_, err := write(s, ctx, func(tx *wtx) (struct{}, error) {
		for _, c := range p.Checkpoints {
			if err := execTx(tx, checkpointPutSQL, c.SessionID, c.Sequence, c.StepID, c.Messages, c.Tokens, []byte(c.State)); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	return mapErr(err)
}

// ContextCheckpointList implements store.ContextCheckpointStore.
func (s *Store) ContextCheckpointList(ctx context.Context, p *store.ContextCheckpointListParams) ([]*store.ContextCheckpoint, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.SessionID == "" {
		return nil, rules.Invalid("session id is required")
	}
	q := `SELECT sequence, step_id, messages, tokens, state FROM context_checkpoints WHERE session_id = ?`
	args := []any{p.SessionID}
	if p.MaxSeq > 0 {
		q += ` AND sequence <= ?`
		args = append(args, p.MaxSeq)
	}
	q += ` ORDER BY sequence DESC`
	if p.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, p.Limit)
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.ContextCheckpoint
	for rows.Next() {
		c := &store.ContextCheckpoint{SessionID: p.SessionID}
		var state []byte
		if err := rows.Scan(&c.Sequence, &c.StepID, &c.Messages, &c.Tokens, &state); err != nil {
			return nil, mapErr(err)
		}
		c.State = state
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}
