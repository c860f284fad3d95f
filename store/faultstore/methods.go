package faultstore

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// SessionCreate implements store.Store under the schedule.
func (s *Store) SessionCreate(ctx context.Context, p *store.SessionCreateParams) (*steptype.Session, error) {
	return write(s, ctx, "SessionCreate", p, func() (*steptype.Session, error) { return s.Store.SessionCreate(ctx, p) })
}

// SessionGet implements store.Store under the schedule.
func (s *Store) SessionGet(ctx context.Context, p *store.SessionGetParams) (*steptype.Session, error) {
	return read(s, ctx, "SessionGet", p, func() (*steptype.Session, error) { return s.Store.SessionGet(ctx, p) })
}

// SessionList implements store.Store under the schedule.
func (s *Store) SessionList(ctx context.Context, p *store.SessionListParams) (*store.SessionPage, error) {
	return read(s, ctx, "SessionList", p, func() (*store.SessionPage, error) { return s.Store.SessionList(ctx, p) })
}

// SessionFork implements store.Store under the schedule.
func (s *Store) SessionFork(ctx context.Context, p *store.SessionForkParams) (*steptype.Session, error) {
	return write(s, ctx, "SessionFork", p, func() (*steptype.Session, error) { return s.Store.SessionFork(ctx, p) })
}

// SessionDelete implements store.Store under the schedule.
func (s *Store) SessionDelete(ctx context.Context, p *store.SessionDeleteParams) error {
	_, err := write(s, ctx, "SessionDelete", p, func() (struct{}, error) { return struct{}{}, s.Store.SessionDelete(ctx, p) })
	return err
}

// SessionUpdate implements store.Store under the schedule.
func (s *Store) SessionUpdate(ctx context.Context, p *store.SessionUpdateParams) (*steptype.Session, error) {
	return write(s, ctx, "SessionUpdate", p, func() (*steptype.Session, error) { return s.Store.SessionUpdate(ctx, p) })
}

// StepAppend implements store.Store under the schedule.
func (s *Store) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	return write(s, ctx, "StepAppend", p, func() ([]*steptype.Step, error) { return s.Store.StepAppend(ctx, p) })
}

// StepList implements store.Store under the schedule.
func (s *Store) StepList(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	return read(s, ctx, "StepList", p, func() ([]*steptype.Step, error) { return s.Store.StepList(ctx, p) })
}

// StepGet implements store.Store under the schedule.
func (s *Store) StepGet(ctx context.Context, p *store.StepGetParams) (*steptype.Step, error) {
	return read(s, ctx, "StepGet", p, func() (*steptype.Step, error) { return s.Store.StepGet(ctx, p) })
}

// StepLast implements store.Store under the schedule.
func (s *Store) StepLast(ctx context.Context, p *store.StepLastParams) (*steptype.Step, error) {
	return read(s, ctx, "StepLast", p, func() (*steptype.Step, error) { return s.Store.StepLast(ctx, p) })
}

// StepCount implements store.Store under the schedule.
func (s *Store) StepCount(ctx context.Context, p *store.StepCountParams) (int64, error) {
	return read(s, ctx, "StepCount", p, func() (int64, error) { return s.Store.StepCount(ctx, p) })
}

// StepTruncate implements store.Store under the schedule.
func (s *Store) StepTruncate(ctx context.Context, p *store.StepTruncateParams) (int64, error) {
	return write(s, ctx, "StepTruncate", p, func() (int64, error) { return s.Store.StepTruncate(ctx, p) })
}

// StepResolve implements store.Store under the schedule.
func (s *Store) StepResolve(ctx context.Context, p *store.StepResolveParams) (*steptype.Step, error) {
	return write(s, ctx, "StepResolve", p, func() (*steptype.Step, error) { return s.Store.StepResolve(ctx, p) })
}

// StepExpiring implements store.Store under the schedule.
func (s *Store) StepExpiring(ctx context.Context, p *store.StepExpiringParams) ([]*steptype.Step, error) {
	return read(s, ctx, "StepExpiring", p, func() ([]*steptype.Step, error) { return s.Store.StepExpiring(ctx, p) })
}

// RunCreate implements store.Store under the schedule.
func (s *Store) RunCreate(ctx context.Context, p *store.RunCreateParams) (*steptype.Run, error) {
	return write(s, ctx, "RunCreate", p, func() (*steptype.Run, error) { return s.Store.RunCreate(ctx, p) })
}

// RunGet implements store.Store under the schedule.
func (s *Store) RunGet(ctx context.Context, p *store.RunGetParams) (*steptype.Run, error) {
	return read(s, ctx, "RunGet", p, func() (*steptype.Run, error) { return s.Store.RunGet(ctx, p) })
}

// RunList implements store.Store under the schedule.
func (s *Store) RunList(ctx context.Context, p *store.RunListParams) ([]*steptype.Run, error) {
	return read(s, ctx, "RunList", p, func() ([]*steptype.Run, error) { return s.Store.RunList(ctx, p) })
}

// RunClaim implements store.Store under the schedule. An ambiguous claim
// leases runs the caller does not know it holds, until their lease
// expires.
func (s *Store) RunClaim(ctx context.Context, p *store.RunClaimParams) ([]*steptype.Run, error) {
	return write(s, ctx, "RunClaim", p, func() ([]*steptype.Run, error) { return s.Store.RunClaim(ctx, p) })
}

// RunUpdate implements store.Store under the schedule.
func (s *Store) RunUpdate(ctx context.Context, p *store.RunUpdateParams) (*steptype.Run, error) {
	return write(s, ctx, "RunUpdate", p, func() (*steptype.Run, error) { return s.Store.RunUpdate(ctx, p) })
}

// RunLeaseRenew implements store.Store under the schedule, which may also
// fail the renewal outright (Config.RenewFail).
func (s *Store) RunLeaseRenew(ctx context.Context, p *store.RunLeaseRenewParams) ([]string, error) {
	d, err := s.before(ctx, "RunLeaseRenew", p, true)
	if err != nil {
		return nil, err
	}
	if d.n != 0 && d.draws[5] < s.cfg.RenewFail {
		s.count(FaultRenewFail)
		return nil, fmt.Errorf("%w: %w: RunLeaseRenew (call %d, not renewed)", store.ErrUnavailable, ErrInjected, d.n)
	}
	ids, err := s.Store.RunLeaseRenew(ctx, p)
	if err = s.after(d, "RunLeaseRenew", err); err != nil {
		return nil, err
	}
	return ids, nil
}
