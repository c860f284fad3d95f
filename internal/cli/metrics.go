package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/store"
)

func init() { register(metricsCmd) }

func metricsCmd(e *env) *cobra.Command {
	var p store.MetricsParams
	var from, to, bucket, lastArg string
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
			last, err := parseDuration(lastArg)
			if err != nil {
				return usagef("--last %s", err)
			}
			if last < 0 {
				return usagef("--last %q is negative: want how far back the range starts, such as 7d", lastArg)
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
			var known func() (bool, error) // whether --agent names an agent
			if e.server != "" {
				c, err := client.New(e.server, client.WithToken(e.token))
				if err != nil {
					return err
				}
				if m, err = c.Metrics(ctx, p); err != nil {
					return err
				}
				known = func() (bool, error) { return knownRemoteAgent(ctx, c, p.Agent) }
			} else {
				st, err := openStore(ctx, e.db, true)
				if err != nil {
					return err
				}
				defer st.Close()
				if m, err = st.Metrics(ctx, &p); err != nil {
					return err
				}
				known = func() (bool, error) { return knownLocalAgent(ctx, st, p.Agent) }
			}
			if p.Agent != "" && metricsEmpty(m) {
				ok, err := known()
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("unknown agent %q: no session of it in %s and no built-in agent of that name", p.Agent, e.source())
				}
			}
			if p.Split != "" && !metricsEmpty(m) && splitUnmatched(m) {
				fmt.Fprintf(e.stderr, "stepwise: no session in this range has the metadata key %q (set it with \"stepwise run --meta %s=VALUE\")\n", p.Split, p.Split)
				if p.Split == "agent" {
					fmt.Fprintln(e.stderr, "stepwise: --split takes a key of the session metadata, not a column; for one agent use --agent NAME")
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
	c.Flags().StringVar(&lastArg, "last", "", "the range is this long, ending at --to (6h, 7d)")
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

// metricsEmpty reports whether m holds no run, step or eval at all.
func metricsEmpty(m *store.Metrics) bool {
	for _, s := range m.Series {
		for _, pt := range s.Points {
			if pt.Runs != 0 || pt.Steps != 0 || pt.EvalScoreAvg != nil {
				return false
			}
		}
	}
	return true
}

// splitUnmatched reports whether every series of m is the one of sessions
// without the split key.
func splitUnmatched(m *store.Metrics) bool {
	for _, s := range m.Series {
		if s.Key != "" {
			return false
		}
	}
	return true
}

// knownLocalAgent reports whether name is a built-in agent or has a session
// in st.
func knownLocalAgent(ctx context.Context, st store.Store, name string) (bool, error) {
	if builtinAgent(name) {
		return true, nil
	}
	page, err := st.SessionList(ctx, &store.SessionListParams{Agent: name, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(page.Sessions) > 0, nil
}

// knownRemoteAgent reports whether the server runs an agent named name or
// holds a session of it.
func knownRemoteAgent(ctx context.Context, c *client.Client, name string) (bool, error) {
	agents, err := c.Agents(ctx)
	if err != nil {
		return false, err
	}
	for _, a := range agents {
		if a.Name == name {
			return true, nil
		}
	}
	page, err := c.Sessions(ctx, client.SessionQuery{Agent: name, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(page.Sessions) > 0, nil
}

// builtinAgent reports whether name is an agent every engine of the command
// line runs (the demo agents and their sub-agents).
func builtinAgent(name string) bool {
	a, err := demo.Agents(demo.Options{})
	if err != nil {
		return false
	}
	op, err := demo.Operator(demo.Options{})
	if err != nil {
		return false
	}
	var has func(*stepwise.Agent) bool
	has = func(a *stepwise.Agent) bool {
		if a.Name == name {
			return true
		}
		return slices.ContainsFunc(a.SubAgents, has)
	}
	return has(a) || has(op)
}

// source names where the command reads: the server, else the database.
func (e *env) source() string {
	if e.server != "" {
		return e.server
	}
	return e.db
}
