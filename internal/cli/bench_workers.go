package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/internal/workerbench"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// benchWorkersCmd: stepwise bench workers, the cost of a step served by a
// worker process over the HTTP protocol.
func benchWorkersCmd(e *env) *cobra.Command {
	var stores []string
	var c workerbench.Config
	var jsonOut bool
	var dir string
	cmd := &cobra.Command{
		Use:   "workers [--store sqlite,postgres] [--cycles N] [--workers N] [--runs N] [--steps N] [--json]",
		Short: "Measure worker steps: latency added over a Go handler step, and steps/s under load",
		Long: `Serve the worker protocol (docs/workers.md) on a loopback port, with workers
that are Go clients of the HTTP protocol in this process, and measure:

  1. latency: one run alternating a Go handler step and a worker step
     (--cycles of each, after 10 of each as a warm-up); a cycle is timed from
     the start of the Go step before it to the start of the one after it, so
     both kinds include two commits. It prints the p50 and p95 of each and
     what the worker step adds.
  2. load: --runs concurrent runs of --steps worker steps each, served by
     --workers workers working on up to --concurrency tasks each: worker
     steps per second.

--store sqlite uses a fresh file (in --dir, default a temp dir); --store
postgres the server of --db postgres://…, in a schema of its own that is
dropped afterwards. The CPU model is printed with the numbers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			for name, v := range map[string]int{"cycles": c.Cycles, "workers": c.Workers, "concurrency": c.Concurrency, "runs": c.Runs, "steps": c.Steps} {
				if v < 1 {
					return usagef("--%s %d: want at least 1", name, v)
				}
			}
			var results []*workerbench.Result
			for _, s := range stores {
				var st store.Store
				switch s {
				case "memory":
					st = memory.New()
				case "sqlite":
					d := dir
					if d == "" {
						tmp, err := os.MkdirTemp("", "stepwise-bench-workers-")
						if err != nil {
							return err
						}
						defer os.RemoveAll(tmp)
						d = tmp
					}
					sq, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(d, "bench-workers.db")})
					if err != nil {
						return err
					}
					st = sq
				case "postgres":
					if !isPostgresDSN(e.db) {
						return usagef("--store postgres needs --db postgres://… (the server to measure on)")
					}
					pg, err := openBenchPostgres(ctx, e.db)
					if err != nil {
						return err
					}
					st = pg
				default:
					return usagef("--store %q: want memory, sqlite or postgres", s)
				}
				cfg := c
				cfg.Store, cfg.Name = st, s
				r, err := workerbench.Run(ctx, cfg)
				cerr := st.Close()
				if err != nil {
					return fmt.Errorf("bench workers (%s): %w", s, err)
				}
				if cerr != nil {
					return cerr
				}
				results = append(results, r)
				if !jsonOut {
					fmt.Fprintln(e.stdout, r)
				}
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(map[string]any{"workers": results})
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&stores, "store", []string{"sqlite"}, "store(s) to measure: memory, sqlite, postgres (on --db)")
	cmd.Flags().IntVar(&c.Cycles, "cycles", 200, "latency: Go steps and worker steps, each, in the one run")
	cmd.Flags().IntVar(&c.Workers, "workers", 10, "load: worker clients")
	cmd.Flags().IntVar(&c.Concurrency, "concurrency", 4, "load: tasks each worker works on at once")
	cmd.Flags().IntVar(&c.Runs, "runs", 100, "load: concurrent runs")
	cmd.Flags().IntVar(&c.Steps, "steps", 10, "load: worker steps per run")
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the SQLite file (default: a temp dir)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object")
	return cmd
}
