package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/internal/bench"
	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/internal/loadgen"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

func init() { register(benchCmd) }

func benchCmd(e *env) *cobra.Command {
	var stores []string
	var steps, runs, gcPct int
	var jsonOut bool
	var sync, dir, provider, cpuProfile, memProfile string
	var httpMode, floor, inProcess, loadClient bool
	var latency time.Duration
	c := &cobra.Command{
		Use:   "bench [--store memory|sqlite|postgres] [--steps N] [--runs N] [--json]",
		Short: "Measure per-step engine overhead on the standard tool loop",
		Long: `Run the standard agent loop (the model asks for one tool, the tool answers,
repeat) on a zero-latency scripted model and report the per-step time, the
mean per-step time of the first and last 10% of the steps, throughput and
peak RSS. --runs N runs N agents concurrently (each with --steps steps) and
reports total throughput. --store postgres measures on the PostgreSQL server of
--db postgres://…, in a schema of its own that is dropped afterwards. The
process runs with the garbage-collection target of ` + "`stepwise serve`" + ` (--gc-percent,
default 400; GOGC in the environment wins), and prints it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if loadClient {
				// The subscribers of --http, started by it in a process
				// of their own.
				if !loadgen.IsClient() {
					return usagef("--http-client is the client process of bench --http, not for direct use")
				}
				return loadgen.ClientMain(cmd.Context())
			}
			if httpMode {
				// Concurrent streaming runs over the HTTP API on loopback,
				// each with an SSE subscriber, by default in a process of
				// their own (this program again, with --http-client).
				st := memory.New()
				defer st.Close()
				cfg := loadgen.Config{Runs: runs, Latency: latency, GCPercent: gcPct, Store: st}
				if !inProcess {
					exe, err := os.Executable()
					if err != nil {
						return fmt.Errorf("bench --http: the client process: %w", err)
					}
					cfg.ClientCommand = []string{exe, "bench", "--http-client"}
				}
				r, err := loadgen.Run(cmd.Context(), cfg)
				if err != nil {
					return err
				}
				if jsonOut {
					return json.NewEncoder(e.stdout).Encode(map[string]any{"http": r})
				}
				fmt.Fprintln(e.stdout, r)
				return nil
			}
			if floor && !slices.Contains(stores, "sqlite") {
				return usagef("--floor measures the SQLite floor: it needs --store sqlite")
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if memProfile != "" {
				f, err := os.Create(memProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				// Written at the end: every allocation of the benchmark
				// (alloc_space, alloc_objects), sampled at Go's default
				// rate.
				defer func() { _ = pprof.Lookup("allocs").WriteTo(f, 0) }()
			}
			// The engine runs at the collector's target of the server
			// process it stands for (stepwise serve), not Go's default.
			defer loadgen.TuneGC(gcPct)()
			var results []*bench.Result
			for _, s := range stores {
				if s != "memory" && s != "sqlite" && s != "postgres" {
					return usagef("--store %q: want memory, sqlite or postgres", s)
				}
				cfg := bench.Config{Store: s, Steps: steps, Runs: runs, Synchronous: sync, Dir: dir, Open: benchOpen}
				if s == "postgres" {
					if !isPostgresDSN(e.db) {
						return usagef("--store postgres needs --db postgres://… (the server to measure on)")
					}
					cfg.OpenGroupCommit = func(ctx context.Context) (bench.GroupCommitter, error) { return openBenchPostgres(ctx, e.db) }
				}
				if floor {
					cfg.Floor, cfg.FloorMinimal = sqlite.Floor, sqlite.FloorMinimal
				}
				switch provider {
				case "scripted":
				case "openai":
					// The loop through the real OpenAI-compatible provider
					// against a local zero-latency fake server.
					var srv *fakeopenai.Server
					cfg.Model = func(iterations int) llm.Model {
						srv = fakeopenai.New(fakeopenai.Config{Iterations: iterations})
						m, err := openai.New(openai.Config{Model: "fake-model", BaseURL: srv.URL + "/v1", APIKey: "bench"})
						if err != nil {
							panic(err)
						}
						return m
					}
					defer func() {
						if srv != nil {
							srv.Close()
						}
					}()
				default:
					return usagef("--provider %q: want scripted or openai", provider)
				}
				r, err := bench.Run(cmd.Context(), cfg)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(map[string]any{"results": results})
			}
			for _, r := range results {
				fmt.Fprintf(e.stdout, "%-7s runs=%d steps=%d  per-step %.1f µs  first-decile %.1f µs  last-decile %.1f µs  %.0f steps/s  %.0f allocs/step  %.1f KB/step  peak RSS %.1f MB  GC percent %d\n",
					r.Store, r.Runs, r.Steps, r.PerStepUS, r.FirstDecileUS, r.LastDecileUS, r.StepsPerS, r.AllocsPerStep, r.BytesPerStep/1024, r.PeakRSSMB, r.GCPercent)
				if r.Commits > 0 {
					fmt.Fprintf(e.stdout, "%-7s group commit: %d appends in %d transactions (%.1f per commit)  CPU per step %.1f µs (this process)",
						r.Store, r.Appends, r.Commits, float64(r.Appends)/float64(r.Commits), r.CPUPerStepUS)
					if r.ServerCPUPerStepUS > 0 {
						fmt.Fprintf(e.stdout, ", %.1f µs (the server, all its processes)", r.ServerCPUPerStepUS)
					}
					fmt.Fprintln(e.stdout)
				}
				if r.FloorUS > 0 {
					fmt.Fprintf(e.stdout, "%-7s floor (raw transaction: 1 INSERT + run and session UPDATEs, same file and synchronous=%s) %.1f µs  engine/floor %.2f×  CPU per step %.1f µs vs floor %.1f µs: %.2f×\n",
						r.Store, r.Synchronous, r.FloorUS, r.Ratio, r.CPUPerStepUS, r.FloorCPUUS, r.CPURatio)
				}
				if r.MinimalFloorUS > 0 {
					fmt.Fprintf(e.stdout, "%-7s minimal floor (the same transaction on the minimal schema: the rows alone, no trigger or extra index) %.1f µs  engine/minimal floor %.2f×  CPU per step vs minimal floor %.1f µs: %.2f×\n",
						r.Store, r.MinimalFloorUS, r.MinimalRatio, r.MinimalFloorCPUUS, r.MinimalCPURatio)
				}
			}
			return nil
		},
	}
	c.Flags().StringSliceVar(&stores, "store", []string{"memory"}, "store(s) to measure: memory, sqlite, postgres (on --db)")
	c.Flags().IntVar(&steps, "steps", 10000, "steps per run")
	c.Flags().IntVar(&runs, "runs", 1, "concurrent runs")
	c.Flags().IntVar(&gcPct, "gc-percent", loadgen.DefaultGCPercent, "garbage-collection target (GOGC) of the benchmark process: by default that of stepwise serve; 100 is Go's default; GOGC in the environment wins")
	c.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object")
	c.Flags().StringVar(&sync, "sync", "NORMAL", "SQLite synchronous mode: NORMAL or FULL")
	c.Flags().StringVar(&dir, "dir", "", "directory for the SQLite file (default: a temp dir)")
	c.Flags().BoolVar(&httpMode, "http", false, "measure streaming over the HTTP API instead: --runs concurrent runs, each with an SSE subscriber")
	c.Flags().BoolVar(&inProcess, "in-process", false, "with --http: run the subscribers in the benchmark's process (sharing its CPUs and Go scheduler) instead of a process of their own")
	c.Flags().BoolVar(&loadClient, "http-client", false, "the client process of --http (internal)")
	_ = c.Flags().MarkHidden("http-client")
	c.Flags().DurationVar(&latency, "latency", loadgen.DefaultLatency, "with --http: model latency before each delta (±50%); the default is BenchmarkHTTPStreaming's pace, about 50 deltas a second per stream")
	c.Flags().BoolVar(&floor, "floor", false, "with --store sqlite: also measure the raw cost of one step's transaction on the same file and print the engine's ratio to it")
	c.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole benchmark to this file")
	c.Flags().StringVar(&memProfile, "memprofile", "", "write an allocation profile of the whole benchmark to this file (go tool pprof -sample_index=alloc_space)")
	c.Flags().StringVar(&provider, "provider", "scripted", "model: scripted (zero latency), or openai (the OpenAI provider against a local fake server)")
	c.AddCommand(benchFillCmd(e), benchQueriesCmd(e), benchWorkersCmd(e))
	return c
}

func benchOpen(ctx context.Context, kind, path, sync string) (store.Store, error) {
	if kind == "sqlite" {
		return sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: sync})
	}
	return memory.New(), nil
}
