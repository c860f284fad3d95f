package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/retention"
)

func init() { register(pruneCmd) }

func pruneCmd(e *env) *cobra.Command {
	var olderThan, statuses string
	var p retention.Params
	var jsonOut bool
	c := &cobra.Command{
		Use:   "prune [--older-than 30d] [--keep N] [--agent NAME] [--status completed,failed] [--dry-run]",
		Short: "Delete old sessions, safely with forks",
		Long: `Delete the sessions of --db whose last activity is older than --older-than
(a duration: 720h, 30d, 90m) and/or that are beyond the --keep most recent of
their agent (given both, a session must be both to go), with their runs,
steps, inputs, observation data and vectors; then the blobs nothing refers to.

A session with an unfinished (queued, running or waiting) run is never
touched. A session that a kept fork reads through its lineage is kept, unless
--materialize-forks: then the fork first gets its own copies of the steps it
inherits and its lineage is cut. --dry-run prints what would go. Deletion is
batched (a few hundred steps per transaction), so a server can keep running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if p.OlderThan, err = parseAge(olderThan); err != nil {
				return usagef("--older-than %s", err)
			}
			if p.Statuses, err = parseStatuses(statuses); err != nil {
				return usagef("--status: %v", err)
			}
			if err := p.Validate(); err != nil {
				return usagef("%v", strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
			}
			if e.server != "" {
				return usagef("prune works on a database (--db), not through --server")
			}
			st, err := openStore(cmd.Context(), e.db, p.DryRun)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := retention.Prune(cmd.Context(), st, p)
			if res != nil && !jsonOut {
				printPrune(e, res)
			}
			if err != nil {
				if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
					return fmt.Errorf("%s; nothing was deleted", strings.TrimPrefix(err.Error(), "stepwise: "))
				}
				return err
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(res)
			}
			return nil
		},
	}
	c.Flags().StringVar(&olderThan, "older-than", "", "prune sessions inactive for longer than this (720h, 30d)")
	c.Flags().IntVar(&p.KeepPerAgent, "keep", 0, "keep the N most recently active sessions of each agent")
	c.Flags().StringVar(&p.Agent, "agent", "", "only sessions of this agent")
	c.Flags().StringVar(&statuses, "status", "", "only sessions whose latest run ended so: completed, failed, cancelled (comma-separated)")
	c.Flags().BoolVar(&p.DryRun, "dry-run", false, "print what would be deleted, delete nothing")
	c.Flags().BoolVar(&p.MaterializeForks, "materialize-forks", false, "let a session go although a kept fork reads through it: copy the steps the fork needs into it first")
	c.Flags().IntVar(&p.BatchSize, "batch", 200, "steps deleted per transaction")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// parseDuration reads a duration, accepting a day suffix ("30d") besides
// Go's units; "" is 0.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n float64
		if n, err = strconv.ParseFloat(days, 64); err == nil {
			d = time.Duration(n * float64(24*time.Hour))
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 720h, 30d or 90m", s)
	}
	return d, nil
}

// parseAge reads a duration as parseDuration does, refusing a negative or
// zero age; "" is no age limit.
func parseAge(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	switch {
	case err != nil || s == "":
		return d, err
	case d < 0:
		return 0, fmt.Errorf("%q is negative: want how long a session has been inactive, such as 30d", s)
	case d == 0:
		return 0, fmt.Errorf("%q is zero: every session would match; want a duration such as 30d", s)
	}
	return d, nil
}

func parseStatuses(s string) ([]steptype.RunStatus, error) {
	var out []steptype.RunStatus
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		st := steptype.RunStatus(f)
		if !st.Valid() || !st.Terminal() {
			return nil, fmt.Errorf("%q: want completed, failed or cancelled", f)
		}
		out = append(out, st)
	}
	return out, nil
}

func printPrune(e *env, res *retention.Result) {
	verb := "deleted"
	if res.DryRun {
		verb = "would delete"
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, f := range res.Materialized {
		w := "materialised"
		if res.DryRun {
			w = "would materialise"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t(fork: gets its own copies of its inherited steps)\n", w, f.ID, f.Agent)
	}
	for _, s := range res.Deleted {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d steps, last active %s\n", verb, s.ID, s.Agent, s.Steps, s.UpdatedAt.Local().Format(time.DateTime))
	}
	for _, s := range res.Kept {
		fmt.Fprintf(tw, "kept\t%s\t%s\t%s\n", s.ID, s.Agent, s.Reason)
	}
	_ = tw.Flush()
	if res.DryRun {
		fmt.Fprintf(e.stdout, "would delete %d sessions (%d steps) and the blobs only they use; would materialise %d forks; kept %d\n",
			len(res.Deleted), res.Steps, len(res.Materialized), len(res.Kept))
		return
	}
	fmt.Fprintf(e.stdout, "deleted %d sessions (%d steps), %d blobs; materialised %d forks (%d steps copied); kept %d\n",
		len(res.Deleted), res.Steps, res.Blobs, len(res.Materialized), res.Copied, len(res.Kept))
}
