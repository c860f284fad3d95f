package stepwise

import (
	"context"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// orphanSweepEvery is how often the executor looks for parents left
// waiting on children that have all ended.
const orphanSweepEvery = 30 * time.Second

// wakeOrphans queues waiting runs whose child runs have all ended. A child's
// end wakes its parent after the child's last commit, and a parent re-checks
// its children after parking; a process killed between such a commit and
// the wake-up that follows it leaves the parent waiting with nothing left to
// wake it. This sweep, at start and then every orphanSweepEvery, is the
// at-least-once wake-up behind both (wakeParent is conditional on the run
// still waiting, so concurrent sweeps and wake-ups queue it once).
func (e *Engine) wakeOrphans(ctx context.Context) {
	runs, err := e.store.RunList(ctx, &store.RunListParams{Statuses: []steptype.RunStatus{steptype.RunWaiting}, Limit: 1000})
	if err != nil {
		return
	}
	for _, r := range runs {
		if ctx.Err() != nil {
			return
		}
		kids, err := e.store.RunList(ctx, &store.RunListParams{ParentRunID: r.ID})
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
			e.wakeParent(ctx, r.ID)
		}
	}
}
