package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/retention"
)

// servePrune is the retention schedule of stepwise serve.
type servePrune struct {
	olderThan   string
	keep        int
	every       time.Duration
	materialize bool
	params      retention.Params
}

func (sp *servePrune) flags(c *cobra.Command) {
	c.Flags().StringVar(&sp.olderThan, "prune-older-than", "", "prune sessions inactive for longer than this (720h, 30d) on a schedule")
	c.Flags().IntVar(&sp.keep, "prune-keep", 0, "prune all but the N most recently active sessions of each agent on a schedule")
	c.Flags().DurationVar(&sp.every, "prune-every", time.Hour, "how often the scheduled prune runs")
	c.Flags().BoolVar(&sp.materialize, "prune-materialize-forks", false, "let the scheduled prune materialise kept forks of pruned sessions")
}

// check validates the flags; enabled reports whether a schedule is set.
func (sp *servePrune) check() (enabled bool, err error) {
	if sp.params.OlderThan, err = parseAge(sp.olderThan); err != nil {
		return false, usagef("--prune-older-than %s", err)
	}
	sp.params.KeepPerAgent, sp.params.MaterializeForks = sp.keep, sp.materialize
	if sp.params.OlderThan == 0 && sp.keep == 0 {
		return false, nil
	}
	if sp.keep < 0 {
		return false, usagef("--prune-keep %d is negative", sp.keep)
	}
	if sp.every < time.Minute {
		return false, usagef("--prune-every %s: want at least 1m", sp.every)
	}
	return true, nil
}

// run prunes st at start and then every sp.every until ctx ends, logging
// each pass to w. A failed pass is logged and retried at the next tick.
func (sp *servePrune) run(ctx context.Context, st store.Store, w io.Writer) {
	t := time.NewTicker(sp.every)
	defer t.Stop()
	for {
		p := sp.params
		res, err := retention.Prune(ctx, st, p)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			fmt.Fprintf(w, "prune: %v\n", err)
		case len(res.Deleted) > 0 || len(res.Materialized) > 0:
			fmt.Fprintf(w, "prune: deleted %d sessions (%d steps), %d blobs; materialised %d forks; kept %d\n",
				len(res.Deleted), res.Steps, res.Blobs, len(res.Materialized), len(res.Kept))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
