package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/store"
)

func init() { register(metricsCmd) }

func metricsCmd(e *env) *cobra.Command {
	var p store.MetricsParams
	var from, to, bucket string
	var last time.Duration
	var jsonOut bool
	c := &cobra.Command{
		Use:   "metrics",
		Short: "Time series of runs, steps, errors, tokens, cost, latency and eval scores",
		Long: `Aggregate runs, steps and evals into time buckets (minute, hour or day) for
one agent (--agent) or all, over a time range (default: the last 24 hours),
optionally split by a key of the session metadata (--split; sessions get
metadata from "stepwise run --meta KEY=VALUE" or POST /v1/sessions).

Per bucket: runs finished and failed, run latency percentiles (finished −
created), steps committed, errors (steps of kind error or failed) and the
error rate, input and output tokens, cost, and the average eval score.
The table leaves out empty buckets; --json prints the GET /v1/metrics
document with every bucket.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			p.Bucket = store.MetricsBucket(bucket)
			for _, f := range []struct {
				name, v string
				dst     *time.Time
			}{{"from", from, &p.From}, {"to", to, &p.To}} {
				if f.v == "" {
					continue
				}
				t, err := time.Parse(time.RFC3339, f.v)
				if err != nil {
					return usagef("--%s %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", f.name, f.v)
				}
				*f.dst = t
			}
			if last > 0 {
				if from != "" {
					return usagef("--last and --from exclude each other")
				}
				if p.To.IsZero() {
					p.To = time.Now()
				}
				p.From = p.To.Add(-last)
			}
			if err := p.Normalize(); err != nil {
				return usagef("%s", trimInvalid(err))
			}
			var m *store.Metrics
			if e.server != "" {
				c, err := client.New(e.server, client.WithToken(e.token))
				if err != nil {
					return err
				}
				if m, err = c.Metrics(ctx, p); err != nil {
					return err
				}
			} else {
				st, err := openStore(ctx, e.db, true)
				if err != nil {
					return err
				}
				defer st.Close()
				if m, err = st.Metrics(ctx, &p); err != nil {
					return err
				}
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(m)
			}
			return printMetrics(e.stdout, m)
		},
	}
	c.Flags().StringVar(&p.Agent, "agent", "", "only this agent (default: all agents)")
	c.Flags().StringVar(&from, "from", "", "start of the range, RFC 3339 (default: --to minus 24h)")
	c.Flags().StringVar(&to, "to", "", "end of the range, RFC 3339, exclusive (default: now)")
	c.Flags().DurationVar(&last, "last", 0, "the range is this long, ending at --to (e.g. 6h)")
	c.Flags().StringVar(&bucket, "bucket", "hour", "bucket width: minute, hour or day")
	c.Flags().StringVar(&p.Split, "split", "", "one series per value of this session metadata key")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the JSON document of GET /v1/metrics")
	return c
}

// trimInvalid drops the sentinel prefix of a store.ErrInvalid error.
func trimInvalid(err error) string {
	msg := err.Error()
	if p := store.ErrInvalid.Error() + ": "; errors.Is(err, store.ErrInvalid) && len(msg) > len(p) {
		return msg[len(p):]
	}
	return msg
}

// printMetrics writes one table per series, leaving out empty buckets.
func printMetrics(w io.Writer, m *store.Metrics) error {
	agent := m.Agent
	if agent == "" {
		agent = "all agents"
	}
	fmt.Fprintf(w, "%s, %s to %s, per %s\n", agent, m.From.Format(time.RFC3339), m.To.Format(time.RFC3339), m.Bucket)
	for _, s := range m.Series {
		if m.Split != "" {
			key := s.Key
			if key == "" {
				key = "(none)"
			}
			fmt.Fprintf(w, "\n%s = %s\n", m.Split, key)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "BUCKET\tRUNS\tFAILED\tSTEPS\tERRORS\tERR%\tIN TOK\tOUT TOK\tCOST $\tP50 ms\tP95 ms\tP99 ms\tEVAL\t")
		empty := 0
		for _, pt := range s.Points {
			if pt.Runs == 0 && pt.Steps == 0 && pt.EvalScoreAvg == nil {
				empty++
				continue
			}
			ev := "-"
			if pt.EvalScoreAvg != nil {
				ev = fmt.Sprintf("%.2f", *pt.EvalScoreAvg)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%d\t%d\t%.4f\t%.0f\t%.0f\t%.0f\t%s\t\n",
				pt.T.Format("2006-01-02 15:04"), pt.Runs, pt.RunsFailed, pt.Steps, pt.Errors, 100*pt.ErrorRate,
				pt.InputTokens, pt.OutputTokens, pt.Cost, pt.LatencyP50Ms, pt.LatencyP95Ms, pt.LatencyP99Ms, ev)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if empty == len(s.Points) {
			fmt.Fprintln(w, "(no runs, steps or evals in this range)")
		} else if empty > 0 {
			fmt.Fprintf(w, "(%d empty buckets not shown)\n", empty)
		}
	}
	return nil
}
