package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// TaskStore is the part of Store that keeps worker tasks (docs/workers.md):
// a step or tool call served by a worker process is a task, keyed uniquely
// by its idempotency key, claimed under a lease with a fencing token that
// every claim increments, and finished at most once, by the holder of the
// current token.
type TaskStore interface {
	// TaskCreate inserts a queued task, or, when p.Owner is set, a task
	// claimed by p.Owner under token 1 with a lease of p.Lease (handed to
	// a worker waiting for one, without a claim of its own). It is
	// idempotent by Key: when a task of that key exists, it is returned
	// as stored (whatever its state) and nothing is written. The task's
	// run must exist (ErrNotFound).
	TaskCreate(ctx context.Context, p *TaskCreateParams) (*Task, error)
	// TaskGet returns a task by ID or by Key, or ErrNotFound.
	TaskGet(ctx context.Context, p *TaskGetParams) (*Task, error)
	// TaskList returns the tasks of a run, oldest first.
	TaskList(ctx context.Context, p *TaskListParams) ([]*Task, error)
	// TaskClaim leases up to p.Limit tasks of p.Agents to p.Owner,
	// oldest first, atomically (no task is leased twice): queued tasks,
	// and claimed tasks whose lease expired. Tasks of runs that finished
	// are never claimed. Each claimed task's Token and Claims are
	// incremented and its lease set to the database's now plus p.Lease.
	TaskClaim(ctx context.Context, p *TaskClaimParams) ([]*Task, error)
	// TaskRenew extends the lease of a claimed task held with p.Token to
	// the database's now plus p.Lease. ErrConflict when the task is not
	// claimed under that token (another claim fenced it, or it finished).
	TaskRenew(ctx context.Context, p *TaskRenewParams) (*Task, error)
	// TaskFinish records the outcome of a claimed task held with p.Token:
	// completed, failed or parked, with p.Result. ErrConflict when the
	// task is not claimed under that token, so exactly one outcome is
	// recorded per task. It returns once the outcome is durable; p.Visible
	// hears of it as soon as other readers can see it.
	TaskFinish(ctx context.Context, p *TaskFinishParams) (*Task, error)
	// TaskRelease hands claimed tasks back (queued, lease cleared, token
	// kept): the task p.ID held with p.Token (ErrConflict otherwise), or
	// every task leased to p.Owner. It returns the tasks released.
	TaskRelease(ctx context.Context, p *TaskReleaseParams) ([]*Task, error)
}

// Task states.
const (
	TaskQueued    = "queued"
	TaskClaimed   = "claimed"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskParked    = "parked"
)

// ChannelTasks is the channel on which drivers with a Notifier announce,
// in the transaction of the change, that a task was queued (TaskQueuedChange)
// or finished (TaskFinishedChange).
const ChannelTasks = "stepwise_tasks"

// TaskQueuedChange is the payload announcing a queued task of agent.
func TaskQueuedChange(agent string) string { return "Q " + agent }

// TaskFinishedChange is the payload announcing that task id finished.
func TaskFinishedChange(id string) string { return "F " + id }

// Task is a worker task.
type Task struct {
	ID           string
	Key          string // idempotency key, unique
	Kind         string // "step" or "tool"
	Name         string // step or tool name
	Agent        string
	AgentVersion string
	SessionID    string
	RunID        string
	StepID       string
	Attempt      int
	Input        json.RawMessage
	State        string
	Owner        string // the worker holding (or last holding) the lease
	Token        int64  // fencing token: 0 until the first claim
	Claims       int
	LeaseExpires time.Time
	Result       json.RawMessage // the outcome, set when finished
	CreatedAt    time.Time
	UpdatedAt    time.Time
	FinishedAt   time.Time
}

// Finished reports whether the task has its outcome.
func (t *Task) Finished() bool {
	return t.State == TaskCompleted || t.State == TaskFailed || t.State == TaskParked
}

// TaskCreateParams are the parameters of TaskStore.TaskCreate.
type TaskCreateParams struct {
	Task *Task // ID, Key, Kind, Name, Agent, SessionID, RunID required
	// Owner, when set, creates the task claimed by Owner with a lease of
	// Lease (required then): its first claim.
	Owner string
	Lease time.Duration
	// Lazy lets the create return before it is durable (PostgreSQL
	// commits it with synchronous_commit off): a crash of the database
	// may then lose the task, and the caller must create it again when
	// it finds it missing (ErrNotFound) while the step that needs it
	// still runs. Any later synchronous commit makes it durable.
	Lazy bool
	Now  time.Time
}

// Created returns the task p creates, as TaskCreate stores it at now:
// queued, or claimed by p.Owner.
func (p *TaskCreateParams) Created(now time.Time) *Task {
	t := CloneTask(p.Task)
	t.State, t.Owner, t.Token, t.Claims, t.LeaseExpires, t.Result = TaskQueued, "", 0, 0, time.Time{}, nil
	if p.Owner != "" {
		t.State, t.Owner, t.Token, t.Claims, t.LeaseExpires = TaskClaimed, p.Owner, 1, 1, now.Add(p.Lease)
	}
	t.CreatedAt, t.UpdatedAt, t.FinishedAt = now, now, time.Time{}
	return t
}

// TaskGetParams are the parameters of TaskStore.TaskGet: ID or Key.
type TaskGetParams struct {
	ID  string
	Key string
}

// TaskListParams are the parameters of TaskStore.TaskList.
type TaskListParams struct {
	RunID string // required
}

// TaskClaimParams are the parameters of TaskStore.TaskClaim.
type TaskClaimParams struct {
	Owner  string        // required
	Agents []string      // required: only tasks of these agents
	Names  []string      // when set, only tasks of these step or tool names
	Lease  time.Duration // required
	Limit  int           // default 1
	Now    time.Time     // overrides the database's clock (tests)
}

// TaskRenewParams are the parameters of TaskStore.TaskRenew.
type TaskRenewParams struct {
	ID    string
	Token int64
	Lease time.Duration
	Now   time.Time
}

// TaskFinishParams are the parameters of TaskStore.TaskFinish.
type TaskFinishParams struct {
	ID     string
	Token  int64
	State  string // TaskCompleted, TaskFailed or TaskParked
	Result json.RawMessage
	Now    time.Time
	// Visible, when set, is called once with the finished task as soon
	// as other readers can see the finish, which may be before it is
	// durable: PostgreSQL commits it with synchronous_commit off and
	// waits for a later synchronous commit (another transaction's, when
	// one completes within a moment, else its own) before TaskFinish
	// returns. A caller acts on the outcome in Visible (the step that
	// waited for it commits, which makes the finish durable with it)
	// and reports it recorded once TaskFinish returned. It is called only
	// once the finish committed; TaskFinish may still fail after it when
	// the finish could not be made durable (the outcome is then unknown,
	// as with a cut COMMIT: a retry under the token reads the task).
	Visible func(*Task)
	// Quiet leaves out the announcement on ChannelTasks: the caller hands
	// the outcome to the one waiting for it itself (Visible). Waiters in
	// other processes then see it on their next read of the table.
	Quiet bool
}

// TaskReleaseParams are the parameters of TaskStore.TaskRelease: ID and
// Token, or Owner.
type TaskReleaseParams struct {
	ID    string
	Token int64
	Owner string
	Now   time.Time
}

// CheckTaskCreate validates TaskCreateParams.
func CheckTaskCreate(p *TaskCreateParams) error {
	if p == nil || p.Task == nil {
		return fmt.Errorf("%w: a task is required", ErrInvalid)
	}
	t := p.Task
	for _, f := range []struct{ name, v string }{{"id", t.ID}, {"key", t.Key}, {"kind", t.Kind}, {"name", t.Name},
		{"agent", t.Agent}, {"session id", t.SessionID}, {"run id", t.RunID}} {
		if f.v == "" {
			return fmt.Errorf("%w: task %s is required", ErrInvalid, f.name)
		}
	}
	if t.Input != nil && !json.Valid(t.Input) {
		return fmt.Errorf("%w: task input is not JSON", ErrInvalid)
	}
	if p.Owner != "" && p.Lease <= 0 {
		return fmt.Errorf("%w: a task created claimed needs a positive lease", ErrInvalid)
	}
	return nil
}

// CheckTaskClaim validates TaskClaimParams and returns the limit.
func CheckTaskClaim(p *TaskClaimParams) (int, error) {
	switch {
	case p == nil || p.Owner == "":
		return 0, fmt.Errorf("%w: claim owner is required", ErrInvalid)
	case len(p.Agents) == 0:
		return 0, fmt.Errorf("%w: claim needs agents", ErrInvalid)
	case p.Lease <= 0:
		return 0, fmt.Errorf("%w: claim lease must be positive", ErrInvalid)
	case p.Limit < 0 || p.Limit > 1000:
		return 0, fmt.Errorf("%w: claim limit must be 0..1000", ErrInvalid)
	}
	return max(1, p.Limit), nil
}

// CheckTaskRenew validates TaskRenewParams.
func CheckTaskRenew(p *TaskRenewParams) error {
	if p == nil || p.ID == "" || p.Lease <= 0 {
		return fmt.Errorf("%w: renew needs a task id and a positive lease", ErrInvalid)
	}
	return nil
}

// CheckTaskFinish validates TaskFinishParams.
func CheckTaskFinish(p *TaskFinishParams) error {
	if p == nil || p.ID == "" {
		return fmt.Errorf("%w: task id is required", ErrInvalid)
	}
	if !slices.Contains([]string{TaskCompleted, TaskFailed, TaskParked}, p.State) {
		return fmt.Errorf("%w: a task finishes completed, failed or parked, not %q", ErrInvalid, p.State)
	}
	if p.Result != nil && !json.Valid(p.Result) {
		return fmt.Errorf("%w: task result is not JSON", ErrInvalid)
	}
	return nil
}

// CheckTaskRelease validates TaskReleaseParams.
func CheckTaskRelease(p *TaskReleaseParams) error {
	if p == nil || (p.ID == "") == (p.Owner == "") {
		return fmt.Errorf("%w: release needs a task id (with its token) or an owner", ErrInvalid)
	}
	return nil
}

// TaskFenced is the error of a call whose token does not hold task t.
func TaskFenced(t *Task, token int64) error {
	if t.Finished() {
		return fmt.Errorf("%w: task %s is %s", ErrConflict, t.ID, t.State)
	}
	if t.State != TaskClaimed {
		return fmt.Errorf("%w: task %s is %s, not claimed", ErrConflict, t.ID, t.State)
	}
	return fmt.Errorf("%w: task %s is held under token %d, not %d", ErrConflict, t.ID, t.Token, token)
}

// CloneTask returns a deep copy of t.
func CloneTask(t *Task) *Task {
	c := *t
	c.Input = slices.Clone(t.Input)
	c.Result = slices.Clone(t.Result)
	return &c
}
