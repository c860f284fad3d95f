package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

const taskCols = `id, key, kind, name, agent, agent_version, session_id, run_id, step_id, attempt, input, state,
	owner, token, claims, lease_expires, result, created_at, updated_at, finished_at`

func scanTask(row pgx.Row) (*store.Task, error) {
	var t store.Task
	var lease, created, updated, finished int64
	if err := row.Scan(&t.ID, &t.Key, &t.Kind, &t.Name, &t.Agent, &t.AgentVersion, &t.SessionID, &t.RunID, &t.StepID, &t.Attempt,
		&t.Input, &t.State, &t.Owner, &t.Token, &t.Claims, &lease, &t.Result, &created, &updated, &finished); err != nil {
		return nil, err
	}
	t.LeaseExpires, t.CreatedAt, t.UpdatedAt, t.FinishedAt = fromNanos(lease), fromNanos(created), fromNanos(updated), fromNanos(finished)
	return &t, nil
}

func scanTaskRows(rows pgx.Rows, err error) ([]*store.Task, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*store.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// taskClock is the caller's clock as nanoseconds, or NULL for the
// database's (now() of the transaction).
func taskClock(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

const taskNowSQL = `COALESCE($%d::bigint, ` + dbNowSQL + `)`

// notifyTask queues a store.ChannelTasks notification in tx, so it
// commits with the change.
func (s *Store) notifyTask(ctx context.Context, tx *wtx, payload string) error {
	name, err := s.channelName(store.ChannelTasks)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, name, payload)
	return err
}

// TaskCreate implements store.TaskStore.
func (s *Store) TaskCreate(ctx context.Context, p *store.TaskCreateParams) (*store.Task, error) {
	if err := store.CheckTaskCreate(p); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		t := p.Task
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, t.RunID).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			return nil, rules.NotFound("run", t.RunID)
		}
		got, err := scanTask(tx.QueryRow(ctx, `INSERT INTO tasks (`+taskCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'queued', '', 0, 0, 0, NULL, `+fmt.Sprintf(taskNowSQL, 12)+`, `+fmt.Sprintf(taskNowSQL, 12)+`, 0)
			ON CONFLICT (key) DO NOTHING RETURNING `+taskCols,
			t.ID, t.Key, t.Kind, t.Name, t.Agent, t.AgentVersion, t.SessionID, t.RunID, t.StepID, t.Attempt, blob(t.Input), taskClock(p.Now)))
		if errors.Is(err, pgx.ErrNoRows) {
			// The key is taken: the stored task is the answer.
			return scanTask(tx.QueryRow(ctx, `SELECT `+taskCols+` FROM tasks WHERE key = $1`, t.Key))
		}
		if err != nil {
			return nil, err
		}
		return got, s.notifyTask(ctx, tx, store.TaskQueuedChange(got.Agent))
	})
}

// TaskGet implements store.TaskStore.
func (s *Store) TaskGet(ctx context.Context, p *store.TaskGetParams) (*store.Task, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || (p.ID == "" && p.Key == "") {
		return nil, rules.Invalid("task id or key is required")
	}
	where, arg := `id = $1`, p.ID
	if p.ID == "" {
		where, arg = `key = $1`, p.Key
	}
	t, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskCols+` FROM tasks WHERE `+where, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.NotFound("task", arg)
	}
	return t, mapErr(err)
}

// TaskList implements store.TaskStore.
func (s *Store) TaskList(ctx context.Context, p *store.TaskListParams) ([]*store.Task, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.RunID == "" {
		return nil, rules.Invalid("run id is required")
	}
	ts, err := scanTaskRows(s.pool.Query(ctx, `SELECT `+taskCols+` FROM tasks WHERE run_id = $1 ORDER BY created_at, id`, p.RunID))
	return ts, mapErr(err)
}

// TaskClaim implements store.TaskStore: candidates are locked with SKIP
// LOCKED, so concurrent claims on any instance take disjoint tasks.
func (s *Store) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*store.Task, error) {
	limit, err := store.CheckTaskClaim(p)
	if err != nil {
		return nil, err
	}
	names := p.Names
	if names == nil {
		names = []string{}
	}
	return inTx(s, ctx, func(tx *wtx) ([]*store.Task, error) {
		ts, err := scanTaskRows(tx.Query(ctx, `WITH clock AS (SELECT `+fmt.Sprintf(taskNowSQL, 1)+` AS n),
			cand AS (
				SELECT t.id FROM tasks t JOIN runs r ON r.id = t.run_id, clock
				WHERE t.state IN ('queued', 'claimed') AND (t.state = 'queued' OR t.lease_expires <= clock.n)
				AND r.status NOT IN ('completed', 'failed', 'cancelled') AND t.agent = ANY($2)
				AND (cardinality($3::text[]) = 0 OR t.name = ANY($3))
				ORDER BY t.created_at, t.id LIMIT $4
				FOR UPDATE OF t SKIP LOCKED)
			UPDATE tasks SET state = 'claimed', owner = $5, token = token + 1, claims = claims + 1,
				lease_expires = (SELECT n FROM clock) + $6, updated_at = (SELECT n FROM clock)
			WHERE id IN (SELECT id FROM cand) RETURNING `+taskCols,
			taskClock(p.Now), p.Agents, names, limit, p.Owner, p.Lease.Nanoseconds()))
		if err != nil {
			return nil, err
		}
		sortTasks(ts)
		return ts, nil
	})
}

// fenced explains why a conditional update of task id under token
// changed no row.
func fenced(ctx context.Context, tx *wtx, id string, token int64) error {
	t, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return rules.NotFound("task", id)
	}
	if err != nil {
		return err
	}
	return store.TaskFenced(t, token)
}

// TaskRenew implements store.TaskStore.
func (s *Store) TaskRenew(ctx context.Context, p *store.TaskRenewParams) (*store.Task, error) {
	if err := store.CheckTaskRenew(p); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		t, err := scanTask(tx.QueryRow(ctx, `UPDATE tasks SET lease_expires = `+fmt.Sprintf(taskNowSQL, 3)+` + $4, updated_at = `+fmt.Sprintf(taskNowSQL, 3)+`
			WHERE id = $1 AND token = $2 AND state = 'claimed' RETURNING `+taskCols, p.ID, p.Token, taskClock(p.Now), p.Lease.Nanoseconds()))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fenced(ctx, tx, p.ID, p.Token)
		}
		return t, err
	})
}

// TaskFinish implements store.TaskStore.
func (s *Store) TaskFinish(ctx context.Context, p *store.TaskFinishParams) (*store.Task, error) {
	if err := store.CheckTaskFinish(p); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		t, err := scanTask(tx.QueryRow(ctx, `UPDATE tasks SET state = $3, result = $4, lease_expires = 0,
			updated_at = `+fmt.Sprintf(taskNowSQL, 5)+`, finished_at = `+fmt.Sprintf(taskNowSQL, 5)+`
			WHERE id = $1 AND token = $2 AND state = 'claimed' RETURNING `+taskCols, p.ID, p.Token, p.State, blob(p.Result), taskClock(p.Now)))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fenced(ctx, tx, p.ID, p.Token)
		}
		if err != nil {
			return nil, err
		}
		return t, s.notifyTask(ctx, tx, store.TaskFinishedChange(t.ID))
	})
}

// TaskRelease implements store.TaskStore.
func (s *Store) TaskRelease(ctx context.Context, p *store.TaskReleaseParams) ([]*store.Task, error) {
	if err := store.CheckTaskRelease(p); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) ([]*store.Task, error) {
		var ts []*store.Task
		var err error
		if p.ID != "" {
			ts, err = scanTaskRows(tx.Query(ctx, `UPDATE tasks SET state = 'queued', lease_expires = 0, updated_at = `+fmt.Sprintf(taskNowSQL, 3)+`
				WHERE id = $1 AND token = $2 AND state = 'claimed' RETURNING `+taskCols, p.ID, p.Token, taskClock(p.Now)))
			if err == nil && len(ts) == 0 {
				return nil, fenced(ctx, tx, p.ID, p.Token)
			}
		} else {
			ts, err = scanTaskRows(tx.Query(ctx, `UPDATE tasks SET state = 'queued', lease_expires = 0, updated_at = `+fmt.Sprintf(taskNowSQL, 2)+`
				WHERE state = 'claimed' AND owner = $1 RETURNING `+taskCols, p.Owner, taskClock(p.Now)))
		}
		if err != nil {
			return nil, err
		}
		sortTasks(ts)
		seen := map[string]bool{}
		for _, t := range ts {
			if !seen[t.Agent] {
				seen[t.Agent] = true
				if err := s.notifyTask(ctx, tx, store.TaskQueuedChange(t.Agent)); err != nil {
					return nil, err
				}
			}
		}
		return ts, nil
	})
}

func sortTasks(ts []*store.Task) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && (ts[j].CreatedAt.Before(ts[j-1].CreatedAt) || (ts[j].CreatedAt.Equal(ts[j-1].CreatedAt) && ts[j].ID < ts[j-1].ID)); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}
