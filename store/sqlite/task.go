package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

const taskCols = `id, key, kind, name, agent, agent_version, session_id, run_id, step_id, attempt, input, state,
	owner, token, claims, lease_expires, result, created_at, updated_at, finished_at`

func scanTask(sc scanner) (*store.Task, error) {
	var t store.Task
	var lease, created, updated, finished int64
	var input, result []byte
	if err := sc.Scan(&t.ID, &t.Key, &t.Kind, &t.Name, &t.Agent, &t.AgentVersion, &t.SessionID, &t.RunID, &t.StepID, &t.Attempt,
		&input, &t.State, &t.Owner, &t.Token, &t.Claims, &lease, &result, &created, &updated, &finished); err != nil {
		return nil, err
	}
	t.Input, t.Result = input, result
	t.LeaseExpires, t.CreatedAt, t.UpdatedAt, t.FinishedAt = fromNanos(lease), fromNanos(created), fromNanos(updated), fromNanos(finished)
	return &t, nil
}

func scanTasks(rows *sql.Rows) ([]*store.Task, error) {
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

// taskNow is the caller's clock, or the database's.
func (tx *wtx) taskNow(t time.Time) (time.Time, error) {
	if !t.IsZero() {
		return t.UTC(), nil
	}
	return tx.dbNow()
}

func (tx *wtx) task(where string, arg any) (*store.Task, error) {
	t, err := scanTask(tx.conn().QueryRowContext(bg, `SELECT `+taskCols+` FROM tasks WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("task", arg.(string))
	}
	return t, err
}

// TaskCreate implements store.TaskStore.
func (s *Store) TaskCreate(ctx context.Context, p *store.TaskCreateParams) (*store.Task, error) {
	if err := store.CheckTaskCreate(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*store.Task, error) {
		if t, err := tx.task(`key = ?`, p.Task.Key); err == nil || !errors.Is(err, store.ErrNotFound) {
			return t, err
		}
		if _, err := tx.run(p.Task.RunID); err != nil {
			return nil, err
		}
		now, err := tx.taskNow(p.Now)
		if err != nil {
			return nil, err
		}
		t := store.CloneTask(p.Task)
		t.State, t.Owner, t.Token, t.Claims, t.LeaseExpires, t.Result = store.TaskQueued, "", 0, 0, time.Time{}, nil
		t.CreatedAt, t.UpdatedAt, t.FinishedAt = now, now, time.Time{}
		_, err = tx.conn().ExecContext(bg, `INSERT INTO tasks (`+taskCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.Key, t.Kind, t.Name, t.Agent, t.AgentVersion, t.SessionID, t.RunID, t.StepID, t.Attempt, blob(t.Input), t.State,
			t.Owner, t.Token, t.Claims, int64(0), nil, nanos(now), nanos(now), int64(0))
		if isUnique(err) {
			return nil, rules.Conflict("task %s exists under another key", t.ID)
		}
		return t, err
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
	where, arg := `id = ?`, p.ID
	if p.ID == "" {
		where, arg = `key = ?`, p.Key
	}
	t, err := scanTask(s.rdb.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE run_id = ? ORDER BY created_at, id`, p.RunID)
	if err != nil {
		return nil, mapErr(err)
	}
	ts, err := scanTasks(rows)
	return ts, mapErr(err)
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// TaskClaim implements store.TaskStore. Claims are serialized by the
// writer, so no task is leased twice.
func (s *Store) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*store.Task, error) {
	limit, err := store.CheckTaskClaim(p)
	if err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) ([]*store.Task, error) {
		now, err := tx.taskNow(p.Now)
		if err != nil {
			return nil, err
		}
		q := `SELECT t.id FROM tasks t JOIN runs r ON r.id = t.run_id
			WHERE t.state IN ('queued', 'claimed') AND (t.state = 'queued' OR t.lease_expires <= ?)
			AND r.status NOT IN ('completed', 'failed', 'cancelled') AND t.agent IN (` + placeholders(len(p.Agents)) + `)`
		args := []any{nanos(now)}
		for _, a := range p.Agents {
			args = append(args, a)
		}
		if len(p.Names) > 0 {
			q += ` AND t.name IN (` + placeholders(len(p.Names)) + `)`
			for _, n := range p.Names {
				args = append(args, n)
			}
		}
		rows, err := tx.conn().QueryContext(bg, q+` ORDER BY t.created_at, t.id LIMIT ?`, append(args, limit)...)
		if err != nil {
			return nil, err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out := []*store.Task{}
		for _, id := range ids {
			t, err := scanTask(tx.conn().QueryRowContext(bg, `UPDATE tasks SET state = 'claimed', owner = ?, token = token + 1,
				claims = claims + 1, lease_expires = ?, updated_at = ? WHERE id = ? RETURNING `+taskCols,
				p.Owner, nanos(now.Add(p.Lease)), nanos(now), id))
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, nil
	})
}

// held returns task id if token holds it, else ErrNotFound or the
// fencing conflict.
func (tx *wtx) heldTask(id string, token int64) (*store.Task, error) {
	t, err := tx.task(`id = ?`, id)
	if err != nil {
		return nil, err
	}
	if t.State != store.TaskClaimed || t.Token != token {
		return nil, store.TaskFenced(t, token)
	}
	return t, nil
}

// TaskRenew implements store.TaskStore.
func (s *Store) TaskRenew(ctx context.Context, p *store.TaskRenewParams) (*store.Task, error) {
	if err := store.CheckTaskRenew(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*store.Task, error) {
		if _, err := tx.heldTask(p.ID, p.Token); err != nil {
			return nil, err
		}
		now, err := tx.taskNow(p.Now)
		if err != nil {
			return nil, err
		}
		return scanTask(tx.conn().QueryRowContext(bg, `UPDATE tasks SET lease_expires = ?, updated_at = ? WHERE id = ? RETURNING `+taskCols,
			nanos(now.Add(p.Lease)), nanos(now), p.ID))
	})
}

// TaskFinish implements store.TaskStore.
func (s *Store) TaskFinish(ctx context.Context, p *store.TaskFinishParams) (*store.Task, error) {
	if err := store.CheckTaskFinish(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*store.Task, error) {
		if _, err := tx.heldTask(p.ID, p.Token); err != nil {
			return nil, err
		}
		now, err := tx.taskNow(p.Now)
		if err != nil {
			return nil, err
		}
		return scanTask(tx.conn().QueryRowContext(bg, `UPDATE tasks SET state = ?, result = ?, lease_expires = 0, updated_at = ?, finished_at = ?
			WHERE id = ? RETURNING `+taskCols, p.State, blob(p.Result), nanos(now), nanos(now), p.ID))
	})
}

// TaskRelease implements store.TaskStore.
func (s *Store) TaskRelease(ctx context.Context, p *store.TaskReleaseParams) ([]*store.Task, error) {
	if err := store.CheckTaskRelease(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) ([]*store.Task, error) {
		now, err := tx.taskNow(p.Now)
		if err != nil {
			return nil, err
		}
		if p.ID != "" {
			if _, err := tx.heldTask(p.ID, p.Token); err != nil {
				return nil, err
			}
			t, err := scanTask(tx.conn().QueryRowContext(bg, `UPDATE tasks SET state = 'queued', lease_expires = 0, updated_at = ?
				WHERE id = ? RETURNING `+taskCols, nanos(now), p.ID))
			if err != nil {
				return nil, err
			}
			return []*store.Task{t}, nil
		}
		rows, err := tx.conn().QueryContext(bg, `UPDATE tasks SET state = 'queued', lease_expires = 0, updated_at = ?
			WHERE state = 'claimed' AND owner = ? RETURNING `+taskCols, nanos(now), p.Owner)
		if err != nil {
			return nil, err
		}
		ts, err := scanTasks(rows)
		if err != nil {
			return nil, err
		}
		sortTasks(ts)
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
