package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// taskTable keeps worker tasks, under its own mutex (taken before the
// store's: a claim reads the status of the tasks' runs).
type taskTable struct {
	mu    sync.Mutex
	byID  map[string]*store.Task
	byKey map[string]*store.Task
}

func (m *Store) taskTable() *taskTable {
	m.tasksOnce.Do(func() { m.tasks = &taskTable{byID: map[string]*store.Task{}, byKey: map[string]*store.Task{}} })
	return m.tasks
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t.UTC()
}

// TaskCreate implements store.TaskStore.
func (m *Store) TaskCreate(ctx context.Context, p *store.TaskCreateParams) (*store.Task, error) {
	if err := store.CheckTaskCreate(p); err != nil {
		return nil, err
	}
	tt := m.taskTable()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if t, ok := tt.byKey[p.Task.Key]; ok {
		return store.CloneTask(t), nil
	}
	if _, ok := tt.byID[p.Task.ID]; ok {
		return nil, fmt.Errorf("%w: task %s exists under another key", store.ErrConflict, p.Task.ID)
	}
	if _, err := m.RunGet(ctx, &store.RunGetParams{ID: p.Task.RunID}); err != nil {
		return nil, err
	}
	t := p.Created(nowOr(p.Now))
	tt.byID[t.ID], tt.byKey[t.Key] = t, t
	return store.CloneTask(t), nil
}

// TaskGet implements store.TaskStore.
func (m *Store) TaskGet(_ context.Context, p *store.TaskGetParams) (*store.Task, error) {
	if p == nil || (p.ID == "" && p.Key == "") {
		return nil, rules.Invalid("task id or key is required")
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	m.mu.RUnlock()
	tt := m.taskTable()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t := tt.byID[p.ID]
	if p.ID == "" {
		t = tt.byKey[p.Key]
	}
	if t == nil {
		return nil, rules.NotFound("task", p.ID+p.Key)
	}
	return store.CloneTask(t), nil
}

// TaskList implements store.TaskStore.
func (m *Store) TaskList(_ context.Context, p *store.TaskListParams) ([]*store.Task, error) {
	if p == nil || p.RunID == "" {
		return nil, rules.Invalid("run id is required")
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	m.mu.RUnlock()
	tt := m.taskTable()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := []*store.Task{}
	for _, t := range tt.byID {
		if t.RunID == p.RunID {
			out = append(out, store.CloneTask(t))
		}
	}
	slices.SortFunc(out, oldestTask)
	return out, nil
}

func oldestTask(a, b *store.Task) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	if a.ID < b.ID {
		return -1
	}
	if a.ID > b.ID {
		return 1
	}
	return 0
}

// TaskClaim implements store.TaskStore.
func (m *Store) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*store.Task, error) {
	limit, err := store.CheckTaskClaim(p)
	if err != nil {
		return nil, err
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	m.mu.RUnlock()
	now := nowOr(p.Now)
	tt := m.taskTable()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	var cands []*store.Task
	for _, t := range tt.byID {
		claimable := t.State == store.TaskQueued || (t.State == store.TaskClaimed && !t.LeaseExpires.After(now))
		if claimable && slices.Contains(p.Agents, t.Agent) && (len(p.Names) == 0 || slices.Contains(p.Names, t.Name)) {
			cands = append(cands, t)
		}
	}
	slices.SortFunc(cands, oldestTask)
	out := []*store.Task{}
	for _, t := range cands {
		if len(out) == limit {
			break
		}
		r, err := m.RunGet(ctx, &store.RunGetParams{ID: t.RunID})
		if err != nil || r.Status.Terminal() {
			continue
		}
		t.State, t.Owner, t.Token, t.Claims = store.TaskClaimed, p.Owner, t.Token+1, t.Claims+1
		t.LeaseExpires, t.UpdatedAt = now.Add(p.Lease), now
		out = append(out, store.CloneTask(t))
	}
	return out, nil
}

// held returns the task id under the table's lock if token holds it.
func (tt *taskTable) held(id string, token int64) (*store.Task, error) {
	t := tt.byID[id]
	if t == nil {
		return nil, rules.NotFound("task", id)
	}
	if t.State != store.TaskClaimed || t.Token != token {
		return nil, store.TaskFenced(t, token)
	}
	return t, nil
}

// TaskRenew implements store.TaskStore.
func (m *Store) TaskRenew(_ context.Context, p *store.TaskRenewParams) (*store.Task, error) {
	if err := store.CheckTaskRenew(p); err != nil {
		return nil, err
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	m.mu.RUnlock()
	tt := m.taskTable()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t, err := tt.held(p.ID, p.Token)
	if err != nil {
		return nil, err
	}
	now := nowOr(p.Now)
	t.LeaseExpires, t.UpdatedAt = now.Add(p.Lease), now
	return store.CloneTask(t), nil
}

// TaskFinish implements store.TaskStore.
func (m *Store) TaskFinish(_ context.Context, p *store.TaskFinishParams) (*store.Task, error) {
	if err := store.CheckTaskFinish(p); err != nil {
		return nil, err
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	m.mu.RUnlock()
	tt := m.taskTable()
	tt.mu.Lock()
	t, err := tt.held(p.ID, p.Token)
	if err != nil {
		tt.mu.Unlock()
		return nil, err
	}
	now := nowOr(p.Now)
	t.State, t.Result, t.LeaseExpires = p.State, slices.Clone(p.Result), time.Time{}
	t.UpdatedAt, t.FinishedAt = now, now
	out := store.CloneTask(t)
	tt.mu.Unlock()
	if p.Visible != nil {
		p.Visible(store.CloneTask(out))
	}
	return out, nil
}

// TaskRelease implements store.TaskStore.
func (m *Store) TaskRelease(_ context.Context, p *store.TaskReleaseParams) ([]*store.Task, error) {
	if err := store.CheckTaskRelease(p); err != nil {
		return nil, err
	}
	if err := m.rlock(); err != nil {
		return nil, err
	}
	m.mu.RUnlock()
	now := nowOr(p.Now)
	tt := m.taskTable()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	var ts []*store.Task
	if p.ID != "" {
		t, err := tt.held(p.ID, p.Token)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	} else {
		for _, t := range tt.byID {
			if t.State == store.TaskClaimed && t.Owner == p.Owner {
				ts = append(ts, t)
			}
		}
		slices.SortFunc(ts, oldestTask)
	}
	out := []*store.Task{}
	for _, t := range ts {
		t.State, t.LeaseExpires, t.UpdatedAt = store.TaskQueued, time.Time{}, now
		out = append(out, store.CloneTask(t))
	}
	return out, nil
}
