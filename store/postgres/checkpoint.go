package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// checkpointPutSQL inserts a checkpoint only while its step is stored: a
// checkpoint taken from a read that a truncation overtook is skipped (the
// foreign key's share lock orders it against a concurrent delete).
const checkpointPutSQL = `INSERT INTO context_checkpoints (session_id, sequence, step_id, messages, tokens, state)
	SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM steps WHERE id = $3 AND session_id = $1 AND sequence = $2)
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
	b := &pgx.Batch{}
	for _, c := range p.Checkpoints {
		b.Queue(checkpointPutSQL, c.SessionID, c.Sequence, c.StepID, c.Messages, c.Tokens, []byte(c.State))
	}
	if b.Len() == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	if pgCode(err) == codeForeignKeyViolation {
		return nil // the step was deleted between the check and the insert
	}
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
	q := `SELECT sequence, step_id, messages, tokens, state FROM context_checkpoints WHERE session_id = $1`
	args := []any{p.SessionID}
	if p.MaxSeq > 0 {
		args = append(args, p.MaxSeq)
		q += ` AND sequence <= $2`
	}
	q += ` ORDER BY sequence DESC`
	if p.Limit > 0 {
		args = append(args, p.Limit)
		q += ` LIMIT $` + string(rune('0'+len(args)))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.ContextCheckpoint, error) {
		c := &store.ContextCheckpoint{SessionID: p.SessionID}
		var state []byte
		err := r.Scan(&c.Sequence, &c.StepID, &c.Messages, &c.Tokens, &state)
		c.State = state
		return c, err
	})
	return out, mapErr(err)
}
