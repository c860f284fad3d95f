package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/store"
)

func init() { register(evalCmd) }

func evalCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "eval",
		Short: "Score steps, runs and sessions; import datasets; run and compare experiments",
	}
	c.AddCommand(evalScoreCmd(e), evalImportCmd(e), evalRunCmd(e), evalCompareCmd(e), evalListCmd(e), evalJudgeCmd(e))
	return c
}

func evalScoreCmd(e *env) *cobra.Command {
	var p eval.ScoreParams
	var target string
	c := &cobra.Command{
		Use:   "score (step|run|session) ID SCORE [--name N] [--label L] [--description D]",
		Short: "Record a user score in [0, 1] on a step, a run or a session",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			target = args[0]
			switch store.EvalTarget(target) {
			case store.TargetStep, store.TargetRun, store.TargetSession:
			default:
				return usagef("target %q: want step, run or session", target)
			}
			var score float64
			if _, err := fmt.Sscan(args[2], &score); err != nil {
				return usagef("score %q: want a number in [0, 1]", args[2])
			}
			p.TargetKind, p.TargetID, p.Score = store.EvalTarget(target), args[1], score
			st, err := openStore(cmd.Context(), e.db, false)
			if err != nil {
				return err
			}
			defer st.Close()
			ev, err := eval.Score(cmd.Context(), st, p)
			if err != nil {
				return err
			}
			return json.NewEncoder(e.stdout).Encode(ev)
		},
	}
	c.Flags().StringVar(&p.Name, "name", "user", "evaluation name")
	c.Flags().StringVar(&p.Label, "label", "", "label, e.g. good or bad")
	c.Flags().StringVar(&p.Description, "description", "", "why")
	c.Flags().StringVar(&p.Author, "author", os.Getenv("USER"), "who scores")
	return c
}

func evalImportCmd(e *env) *cobra.Command {
	var p eval.ImportParams
	c := &cobra.Command{
		Use:   "import FILE.jsonl --name NAME",
		Short: `Import a dataset: one {"input": …, "expected": …} per line; malformed lines are reported, the rest imported`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := openStore(cmd.Context(), e.db, false)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := eval.ImportJSONL(cmd.Context(), st, f, p)
			if err != nil {
				return err
			}
			for _, le := range res.Errors {
				fmt.Fprintf(e.stderr, "%s:%d: %v\n", args[0], le.Line, le.Err)
			}
			fmt.Fprintf(e.stdout, "dataset %s: %d items imported, %d lines refused\n", res.Dataset.ID, res.Imported, len(res.Errors))
			return nil
		},
	}
	c.Flags().StringVar(&p.Name, "name", "", "dataset name (required)")
	c.Flags().StringVar(&p.Description, "description", "", "dataset description")
	return c
}

func evalRunCmd(e *env) *cobra.Command {
	var cfg eval.ExperimentConfig
	var agent string
	c := &cobra.Command{
		Use:   "run --dataset ID --agent FILE|NAME [--name N] [--concurrency 4]",
		Short: "Run an agent over a dataset and evaluate every item (an experiment)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := e.open(cmd.Context(), agent)
			if err != nil {
				return err
			}
			defer rt.Close()
			cfg.Engine, cfg.Agent = rt.eng, rt.agentName(agent)
			x, err := eval.RunExperiment(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(x)
		},
	}
	c.Flags().StringVar(&cfg.Dataset, "dataset", "", "dataset id or name")
	c.Flags().StringVar(&agent, "agent", "", "agent file or name")
	c.Flags().StringVar(&cfg.Name, "name", "", "experiment name")
	c.Flags().IntVar(&cfg.Concurrency, "concurrency", 4, "items run at once")
	return c
}

func evalCompareCmd(e *env) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "compare EXPERIMENT_A EXPERIMENT_B",
		Short: "Compare two experiments side by side",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(cmd.Context(), e.db, true)
			if err != nil {
				return err
			}
			defer st.Close()
			cmp, err := eval.Compare(cmd.Context(), st, args[0], args[1])
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(cmp)
			}
			return cmp.WriteTable(e.stdout)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

func evalListCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "list (step|run|session) ID",
		Short: "List the evals of a step, run or session",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(cmd.Context(), e.db, true)
			if err != nil {
				return err
			}
			defer st.Close()
			evs, err := st.EvalList(cmd.Context(), &store.EvalListParams{TargetKind: store.EvalTarget(args[0]), TargetID: args[1]})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(evs)
		},
	}
}
