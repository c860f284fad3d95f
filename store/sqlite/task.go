package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

const taskCols = `id, key, kind, name, agent, agent_version, session_id, run_id, step_id, attempt, input, state,
	owner, token, claims, lease_expires, result, created_at, updated_at, finished_at`

// taskNowSQL is the caller's clock (?N, NULL for none) or the database's.
const taskNowSQL = `COALESCE(?%d, ` + dbNowSQL + `)`

// The task writes are one prepared statement each (stmts), so a worker
// step's create, claim and finish cost a statement, not a parse and a
// read before the write.
var (
	// taskInsertSQL inserts a task of a run that exists, unless its key
	// is taken (no row returned means one or the other): queued, or
	// claimed by ?14 under token 1 (?15) with a lease of ?16.
	taskInsertSQL = `INSERT INTO tasks (` + taskCols + `)
		SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?13, ?14, ?15, ?15, CASE WHEN ?15 = 0 THEN 0 ELSE n + ?16 END, NULL, n, n, 0
		FROM (SELECT ` + fmt.Sprintf(taskNowSQL, 12) + ` AS n) WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?8)
		ON CONFLICT (key) DO NOTHING RETURNING ` + taskCols
	// taskClaimSQL leases up to ?5 claimable tasks of the agents ?4, a
	// JSON array, oldest first; taskClaimNamesSQL only those of the names
	// ?6 (a JSON array). (LIMIT (SELECT ?5): a LIMIT ?5 would have the
	// statement prepared again for every value bound.)
	taskClaimSQL      = taskClaimSQLFor(``)
	taskClaimNamesSQL = taskClaimSQLFor(`AND t.name IN (SELECT value FROM json_each(?6))`)
	// taskRenewSQL and taskFinishSQL change task ?1 only while token ?2
	// holds it: no row returned means it does not.
	taskRenewSQL = `UPDATE tasks SET lease_expires = ` + fmt.Sprintf(taskNowSQL, 3) + ` + ?4, updated_at = ` + fmt.Sprintf(taskNowSQL, 3) + `
		WHERE id = ?1 AND token = ?2 AND state = 'claimed' RETURNING ` + taskCols
	taskFinishSQL = `UPDATE tasks SET state = ?4, result = ?5, lease_expires = 0, updated_at = ` + fmt.Sprintf(taskNowSQL, 3) + `,
		finished_at = ` + fmt.Sprintf(taskNowSQL, 3) + ` WHERE id = ?1 AND token = ?2 AND state = 'claimed' RETURNING ` + taskCols
)

func taskClaimSQLFor(names string) string {
	return `WITH clock AS (SELECT ` + fmt.Sprintf(taskNowSQL, 1) + ` AS n)
		UPDATE tasks SET state = 'claimed', owner = ?2, token = token + 1, claims = claims + 1,
			lease_expires = (SELECT n FROM clock) + ?3, updated_at = (SELECT n FROM clock)
		WHERE id IN (SELECT t.id FROM tasks t JOIN runs r ON r.id = t.run_id
			WHERE t.state IN ('queued', 'claimed') AND (t.state = 'queued' OR t.lease_expires <= (SELECT n FROM clock))
			AND r.status NOT IN ('completed', 'failed', 'cancelled') AND t.agent IN (SELECT value FROM json_each(?4)) ` + names + `
			ORDER BY t.created_at, t.id LIMIT (SELECT ?5))
		RETURNING ` + taskCols
}

// taskClock is the caller's clock as nanoseconds, or NULL for the
// database's.
func taskClock(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

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

// task reads task id (or, byKey, the task of key id) in the transaction.
func (tx *wtx) task(id string, byKey bool) (*store.Task, error) {
	q := tx.st.taskByID
	if byKey {
		q = tx.st.taskByKey
	}
	t, err := scanTask(q.QueryRowContext(bg, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("task", id)
	}
	return t, err
}

// TaskCreate implements store.TaskStore.
func (s *Store) TaskCreate(ctx context.Context, p *store.TaskCreateParams) (*store.Task, error) {
	if err := store.CheckTaskCreate(p); err != nil {
		return nil, err
	}
	c := p.Created(time.Time{})
	return write(s, ctx, func(tx *wtx) (*store.Task, error) {
		t := p.Task
		got, err := scanTask(tx.st.taskInsert.QueryRowContext(bg, t.ID, t.Key, t.Kind, t.Name, t.Agent, t.AgentVersion, t.SessionID,
			t.RunID, t.StepID, t.Attempt, blob(t.Input), taskClock(p.Now), c.State, c.Owner, c.Token, p.Lease.Nanoseconds()))
		if isUnique(err) {
			return nil, rules.Conflict("task %s exists under another key", t.ID)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return got, err
		}
		// The key is taken (the stored task is the answer), or the run
		// does not exist.
		if got, err := tx.task(t.Key, true); err == nil || !errors.Is(err, store.ErrNotFound) {
			return got, err
		}
		_, err = tx.run(t.RunID)
		if err == nil {
			err = fmt.Errorf("stepwise: sqlite: task %s was not inserted", t.ID)
		}
		return nil, err
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

// TaskClaim implements store.TaskStore. Claims are serialized by the
// writer, so no task is leased twice.
func (s *Store) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*store.Task, error) {
	limit, err := store.CheckTaskClaim(p)
	if err != nil {
		return nil, err
	}
	agents, err := json.Marshal(p.Agents)
	if err != nil {
		return nil, err
	}
	names := ""
	if len(p.Names) > 0 {
		b, err := json.Marshal(p.Names)
		if err != nil {
			return nil, err
		}
		names = string(b)
	}
	return write(s, ctx, func(tx *wtx) ([]*store.Task, error) {
		q, args := tx.st.taskClaim, []any{taskClock(p.Now), p.Owner, p.Lease.Nanoseconds(), string(agents), limit}
		if names != "" {
			q, args = tx.st.taskClaimNames, append(args, names)
		}
		rows, err := q.QueryContext(bg, args...)
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

// held returns task id if token holds it, else ErrNotFound or the
// fencing conflict.
func (tx *wtx) heldTask(id string, token int64) (*store.Task, error) {
	t, err := tx.task(id, false)
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
		return tx.heldUpdate(p.ID, p.Token, tx.st.taskRenew, p.ID, p.Token, taskClock(p.Now), p.Lease.Nanoseconds())
	})
}

// heldUpdate runs q, an update of task id that changes it only while
// token holds it, and returns the task it returned, or why token does
// not hold it.
func (tx *wtx) heldUpdate(id string, token int64, q *sql.Stmt, args ...any) (*store.Task, error) {
	t, err := scanTask(q.QueryRowContext(bg, args...))
	if errors.Is(err, sql.ErrNoRows) {
		_, err = tx.heldTask(id, token)
		if err == nil {
			err = fmt.Errorf("stepwise: sqlite: task %s is held but was not changed", id)
		}
		return nil, err
	}
	return t, err
}

// TaskFinish implements store.TaskStore.
func (s *Store) TaskFinish(ctx context.Context, p *store.TaskFinishParams) (*store.Task, error) {
	if err := store.CheckTaskFinish(p); err != nil {
		return nil, err
	}
	t, err := write(s, ctx, func(tx *wtx) (*store.Task, error) {
		return tx.heldUpdate(p.ID, p.Token, tx.st.taskFinish, p.ID, p.Token, taskClock(p.Now), p.State, blob(p.Result))
	})
	if err == nil && p.Visible != nil {
		p.Visible(store.CloneTask(t))
	}
	return t, err
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
