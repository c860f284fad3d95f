package executor

import (
	"context"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// orphanSweepEvery is how often the service looks for parents left
// waiting on children that have all ended.
const orphanSweepEvery = 30 * time.Second

// wakeOrphans queues waiting runs whose child runs have all ended. A child's
// end wakes its parent after the child's last commit, and a parent re-checks
// its children after parking; a process killed between such a commit and
// the wake-up that follows it leaves the parent waiting with nothing left to
// wake it. This sweep, at start and then every orphanSweepEvery, is the
// at-least-once wake-up behind both (WakeParent is conditional on the run
// still waiting, so concurrent sweeps and wake-ups queue it once).
func (s *Service) wakeOrphans(ctx context.Context) {
	runs, err := s.cfg.Store.RunList(ctx, &store.RunListParams{Statuses: []steptype.RunStatus{steptype.RunWaiting}, Limit: 1000})
	if err != nil {
		return
	}
	for _, r := range runs {
		if ctx.Err() != nil {
			return
		}
		kids, err := s.cfg.Store.RunList(ctx, &store.RunListParams{ParentRunID: r.ID})
		if err != nil || len(kids) == 0 {
			continue
		}
		ended := true
		for _, k := range kids {
			if !k.Status.Terminal() {
				ended = false
				break
			}
		}
		if ended {
			s.WakeParent(ctx, r.ID)
		}
	}
}

// WakeParent queues a run waiting for its children once none of its own
// input requests is pending.
func (s *Service) WakeParent(ctx context.Context, parentID string) {
	waiting, err := s.cfg.Store.StepList(ctx, &store.StepListParams{RunID: parentID, Status: steptype.StepWaiting, Limit: 1})
	if err != nil || len(waiting) > 0 {
		return
	}
	queued := steptype.RunQueued
	if _, err := s.cfg.Store.RunUpdate(ctx, &store.RunUpdateParams{ID: parentID, ExpectStatus: []steptype.RunStatus{steptype.RunWaiting}, Status: &queued, ClearLease: true, Now: s.cfg.Now()}); err == nil {
		s.Wake()
	}
}
