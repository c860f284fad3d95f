package faultstore

import (
	"context"

	"github.com/stepwise-run/stepwise/store"
)

// TaskCreate implements store.TaskStore under the schedule. An ambiguous
// create may have stored the task: a retry finds it by key.
func (s *Store) TaskCreate(ctx context.Context, p *store.TaskCreateParams) (*store.Task, error) {
	return write(s, ctx, "TaskCreate", p, func() (*store.Task, error) { return s.Store.TaskCreate(ctx, p) })
}

// TaskGet implements store.TaskStore under the schedule.
func (s *Store) TaskGet(ctx context.Context, p *store.TaskGetParams) (*store.Task, error) {
	return read(s, ctx, "TaskGet", p, func() (*store.Task, error) { return s.Store.TaskGet(ctx, p) })
}

// TaskList implements store.TaskStore under the schedule.
func (s *Store) TaskList(ctx context.Context, p *store.TaskListParams) ([]*store.Task, error) {
	return read(s, ctx, "TaskList", p, func() ([]*store.Task, error) { return s.Store.TaskList(ctx, p) })
}

// TaskClaim implements store.TaskStore under the schedule. An ambiguous
// claim may have leased tasks that nobody works on: they are offered again
// once their lease passes.
func (s *Store) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*store.Task, error) {
	return write(s, ctx, "TaskClaim", p, func() ([]*store.Task, error) { return s.Store.TaskClaim(ctx, p) })
}

// TaskRenew implements store.TaskStore under the schedule.
func (s *Store) TaskRenew(ctx context.Context, p *store.TaskRenewParams) (*store.Task, error) {
	return write(s, ctx, "TaskRenew", p, func() (*store.Task, error) { return s.Store.TaskRenew(ctx, p) })
}

// TaskFinish implements store.TaskStore under the schedule. An ambiguous
// finish may have committed: a retry with the same token then gets
// ErrConflict and reads the task to see its outcome.
func (s *Store) TaskFinish(ctx context.Context, p *store.TaskFinishParams) (*store.Task, error) {
	return write(s, ctx, "TaskFinish", p, func() (*store.Task, error) { return s.Store.TaskFinish(ctx, p) })
}

// TaskRelease implements store.TaskStore under the schedule.
func (s *Store) TaskRelease(ctx context.Context, p *store.TaskReleaseParams) ([]*store.Task, error) {
	return write(s, ctx, "TaskRelease", p, func() ([]*store.Task, error) { return s.Store.TaskRelease(ctx, p) })
}
