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

// TaskCreate implements store.TaskStore: the insert (of a task of a run
// that exists, unless its key is taken) and its notification travel in
// one round trip with the transaction's BEGIN and COMMIT.
func (s *Store) TaskCreate(ctx context.Context, p *store.TaskCreateParams) (*store.Task, error) {
	if err := store.CheckTaskCreate(p); err != nil {
		return nil, err
	}
	channel, err := s.channelName(store.ChannelTasks)
	if err != nil {
		return nil, err
	}
	t, c := p.Task, p.Created(time.Time{})
	got, err := inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		var got *store.Task
		b := &pgx.Batch{}
		if p.Lazy {
			tx.lazy(b)
		}
		b.Queue(`INSERT INTO tasks (`+taskCols+`)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13, $14, $15::bigint, $15::integer, CASE WHEN $15::bigint = 0 THEN 0 ELSE n + $16::bigint END, NULL, n, n, 0
			FROM (SELECT `+fmt.Sprintf(taskNowSQL, 12)+` AS n) clock WHERE EXISTS (SELECT 1 FROM runs WHERE id = $8)
			ON CONFLICT (key) DO NOTHING RETURNING `+taskCols,
			t.ID, t.Key, t.Kind, t.Name, t.Agent, t.AgentVersion, t.SessionID, t.RunID, t.StepID, t.Attempt, blob(t.Input), taskClock(p.Now),
			c.State, c.Owner, c.Token, p.Lease.Nanoseconds()).
			QueryRow(func(row pgx.Row) error {
				var err error
				if got, err = scanTask(row); errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return err
			})
		// Announced only when this insert made the task, queued: a task
		// created claimed (handed to a waiting worker) is not.
		if c.Owner == "" {
			b.Queue(`SELECT pg_notify($1, $2) FROM tasks WHERE id = $3 AND key = $4 AND claims = 0`,
				channel, store.TaskQueuedChange(t.Agent), t.ID, t.Key)
		}
		return got, tx.send(ctx, b, true)
	})
	if err != nil || got != nil {
		return got, err
	}
	// The key is taken (the stored task is the answer), or the run does
	// not exist.
	return inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		got, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskCols+` FROM tasks WHERE key = $1`, t.Key))
		if !errors.Is(err, pgx.ErrNoRows) {
			return got, err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, t.RunID).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			return nil, rules.NotFound("run", t.RunID)
		}
		return nil, fmt.Errorf("stepwise: postgres: task %s was not inserted", t.ID)
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
		var ts []*store.Task
		b := &pgx.Batch{}
		b.Queue(`WITH clock AS (SELECT `+fmt.Sprintf(taskNowSQL, 1)+` AS n),
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
			taskClock(p.Now), p.Agents, names, limit, p.Owner, p.Lease.Nanoseconds()).Query(func(rows pgx.Rows) error {
			var err error
			ts, err = scanTaskRows(rows, nil)
			return err
		})
		if err := tx.send(ctx, b, true); err != nil {
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

// heldUpdate runs sql, an update of task id that changes it only while
// token holds it, with its BEGIN and COMMIT (and notify, when set) in one
// round trip, and returns the task it returned, or why token does not
// hold it.
func (s *Store) heldUpdate(ctx context.Context, id string, token int64, lazy bool, notify *pgx.QueuedQuery, sql string, args ...any) (*store.Task, error) {
	t, err := inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		var t *store.Task
		b := &pgx.Batch{}
		if lazy {
			tx.lazy(b)
		}
		b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
			var err error
			if t, err = scanTask(row); errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		if notify != nil {
			b.QueuedQueries = append(b.QueuedQueries, notify)
		}
		return t, tx.send(ctx, b, true)
	})
	if err != nil || t != nil {
		return t, err
	}
	return inTx(s, ctx, func(tx *wtx) (*store.Task, error) {
		return nil, fenced(ctx, tx, id, token)
	})
}

// TaskRenew implements store.TaskStore.
func (s *Store) TaskRenew(ctx context.Context, p *store.TaskRenewParams) (*store.Task, error) {
	if err := store.CheckTaskRenew(p); err != nil {
		return nil, err
	}
	return s.heldUpdate(ctx, p.ID, p.Token, false, nil, `UPDATE tasks SET lease_expires = `+fmt.Sprintf(taskNowSQL, 3)+` + $4, updated_at = `+fmt.Sprintf(taskNowSQL, 3)+`
		WHERE id = $1 AND token = $2 AND state = 'claimed' RETURNING `+taskCols, p.ID, p.Token, taskClock(p.Now), p.Lease.Nanoseconds())
}

// TaskFinish implements store.TaskStore.
func (s *Store) TaskFinish(ctx context.Context, p *store.TaskFinishParams) (*store.Task, error) {
	if err := store.CheckTaskFinish(p); err != nil {
		return nil, err
	}
	channel, err := s.channelName(store.ChannelTasks)
	if err != nil {
		return nil, err
	}
	// Announced when the task is finished under the token: by this
	// update, or (a repeat, harmless) by an earlier one.
	var notify *pgx.QueuedQuery
	if !p.Quiet {
		notify = &pgx.QueuedQuery{SQL: `SELECT pg_notify($1, $2) FROM tasks WHERE id = $3 AND token = $4 AND state = $5`,
			Arguments: []any{channel, store.TaskFinishedChange(p.ID), p.ID, p.Token, p.State}}
	}
	// With Visible, the finish commits lazily: the step that waited for
	// it commits at once, and its synchronous commit flushes both.
	lazy := p.Visible != nil
	t, err := s.heldUpdate(ctx, p.ID, p.Token, lazy, notify, `UPDATE tasks SET state = $3, result = $4, lease_expires = 0,
		updated_at = `+fmt.Sprintf(taskNowSQL, 5)+`, finished_at = `+fmt.Sprintf(taskNowSQL, 5)+`
		WHERE id = $1 AND token = $2 AND state = 'claimed' RETURNING `+taskCols, p.ID, p.Token, p.State, blob(p.Result), taskClock(p.Now))
	if err != nil || !lazy {
		return t, err
	}
	mark := s.commits.mark()
	p.Visible(store.CloneTask(t))
	if err := s.durable(ctx, mark, t.ID); err != nil {
		return nil, err
	}
	return t, nil
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
