package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/store"
)

func evalJudgeCmd(e *env) *cobra.Command {
	var agent string
	var jsonOut bool
	c := &cobra.Command{
		Use:   "judge RUN|SESSION --agent FILE [--json]",
		Short: "Grade a run (or every run of a session) with the LLM judges of its agent file",
		Long: `Grade a run, or every run of a session, with the rubrics of observe.judge in
the run's agent file, now (runs are also judged when they end unless
on_run_end is false). Each rubric gives one eval of the run: the weighted
share of criteria passed, pass or fail against its pass_score, and for each
criterion the judge's verdict and reason. With --server the server's agent
files are used and --agent is not needed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var evs []*store.Eval
			var err error
			if e.server != "" {
				evs, err = judgeRemote(ctx, e, args[0])
			} else {
				if agent == "" {
					return usagef("--agent FILE is required: the agent file declaring observe.judge")
				}
				var rt *runtime
				if rt, err = e.open(ctx, agent); err != nil {
					return err
				}
				defer rt.Close()
				if rt.judges == nil {
					return fmt.Errorf("%s keeps no evals", e.db)
				}
				evs, err = rt.judges.JudgeRun(ctx, args[0])
				if errors.Is(err, store.ErrNotFound) {
					evs, err = rt.judges.JudgeSession(ctx, args[0])
				}
			}
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(map[string]any{"evals": evs})
			}
			return printJudgments(e.stdout, evs)
		},
	}
	c.Flags().StringVar(&agent, "agent", "", "agent file whose observe.judge grades the run")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the evals as JSON")
	return c
}

// judgeRemote judges id as a run, or as a session when no run has that id.
func judgeRemote(ctx context.Context, e *env, id string) ([]*store.Eval, error) {
	c, err := client.New(e.server, client.WithToken(e.token))
	if err != nil {
		return nil, err
	}
	evs, err := c.JudgeRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return c.JudgeSession(ctx, id)
	}
	return evs, err
}

// printJudgments writes each eval and its criteria.
func printJudgments(w io.Writer, evs []*store.Eval) error {
	for _, ev := range evs {
		fmt.Fprintf(w, "%s  run %s  %s  score %.2f  %s\n", ev.Name, ev.RunID, ev.Label, ev.Score, ev.Description)
		var d struct {
			Criteria []struct {
				Name   string  `json:"name"`
				Weight float64 `json:"weight"`
				Pass   bool    `json:"pass"`
				Reason string  `json:"reason"`
			} `json:"criteria"`
		}
		if json.Unmarshal(ev.Details, &d) != nil {
			continue
		}
		for _, c := range d.Criteria {
			mark := "FAIL"
			if c.Pass {
				mark = "pass"
			}
			fmt.Fprintf(w, "  %s  %s (weight %g): %s\n", mark, c.Name, c.Weight, c.Reason)
		}
	}
	return nil
}
