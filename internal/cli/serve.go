package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/internal/loadgen"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/worker"
)

func init() { register(serveCmd) }

func serveCmd(e *env) *cobra.Command {
	var addr, agentsDir, tokensFile string
	var tokens, agentFiles []string
	var sp servePrune
	var events bool
	var gcPercent, viewCacheMiB int
	c := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7700] [--agents DIR]",
		Short: "Serve the HTTP API, the event streams and the dashboard",
		Long: `Serve the /v1 HTTP API, its SSE streams, the AG-UI endpoint and the dashboard
from one process. Agents: the built-in demo agents, every --agent FILE, and in
--agents DIR every DIR/*/agent.{yaml,yml,json} and DIR/*.agent.{yaml,yml,json}.
Bearer tokens come from --token (repeatable), --tokens-file (one per line) and
STEPWISE_TOKENS (comma-separated); they are required unless --addr is a
loopback address. On SIGINT/SIGTERM the server shuts down gracefully: running
runs stop at a step boundary and are resumed at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			e.events = events
			defer loadgen.TuneGC(gcPercent)()
			toks, err := collectTokens(tokens, tokensFile)
			if err != nil {
				return err
			}
			if err := server.RequireTokens(addr, toks); err != nil {
				return err
			}
			pruning, err := sp.check()
			if err != nil {
				return err
			}
			if e.lease <= 0 {
				return usagef("--lease must be positive")
			}
			if e.workerLease <= 0 {
				return usagef("--worker-lease must be positive")
			}
			if e.storeTimeout < 0 {
				return usagef("--store-timeout must be 0 (none) or positive")
			}
			if viewCacheMiB < 0 {
				return usagef("--view-cache must be 0 (off) or a positive number of MiB")
			}
			e.viewCache = int64(viewCacheMiB) << 20
			if viewCacheMiB == 0 {
				e.viewCache = -1
			}
			if err := server.ValidTokens(toks); err != nil {
				return usagef("%v", err)
			}
			files := append([]string(nil), agentFiles...)
			if agentsDir != "" {
				found, err := agentFilesIn(agentsDir)
				if err != nil {
					return err
				}
				files = append(files, found...)
			}
			rt, err := e.open(ctx, "", files...)
			if err != nil {
				return err
			}
			defer func() {
				// A store that does not answer is abandoned within its
				// bound: say what was left.
				if err := rt.Close(); err != nil {
					fmt.Fprintf(e.stderr, "stepwise serve: shutdown: %v\n", err)
				}
			}()
			if pruning {
				pctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); sp.run(pctx, rt.st, e.stdout) }()
				defer func() { stop(); <-done }() // before the store closes
			}
			return e.listen(ctx, rt, addr, toks)
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:7700", "listen address")
	c.Flags().IntVar(&gcPercent, "gc-percent", loadgen.DefaultGCPercent, "garbage-collection target of the server process (GOGC): fewer collections, a shorter streaming tail, a heap up to (1+N/100)× the live data; GOGC in the environment wins, 0 keeps Go's default, GOMEMLIMIT caps the heap")
	c.Flags().StringVar(&agentsDir, "agents", "", "directory of agent files")
	c.Flags().StringSliceVar(&agentFiles, "agent", nil, "agent file (repeatable)")
	c.Flags().StringSliceVar(&tokens, "token", nil, "accepted bearer token (repeatable)")
	c.Flags().StringVar(&tokensFile, "tokens-file", "", "file with one accepted bearer token per line")
	sp.flags(c)
	c.Flags().DurationVar(&e.lease, "lease", 30*time.Second, "how long a run claimed by this instance stays its own without a heartbeat (heartbeats every lease/3); a crashed instance's runs are taken over after it")
	c.Flags().BoolVar(&e.noStepRes, "no-step-resources", false, "do not measure the CPU time and allocation of each step (their cost per step); STEPWISE_STEP_RESOURCES=off does the same")
	c.Flags().DurationVar(&e.workerLease, "worker-lease", worker.DefaultLease, "how long a task claimed by a worker process stays its own without a heartbeat; a dead worker's tasks are offered again after it (docs/workers.md)")
	c.Flags().DurationVar(&e.storeTimeout, "store-timeout", server.DefaultStoreTimeout, "answer an API request the database has not answered within this with 503 storage_unavailable (streams and long-polls excepted; 0: wait)")
	c.Flags().IntVar(&viewCacheMiB, "view-cache", server.DefaultViewCacheBytes>>20, "MiB of steps the agent overview and graph keep between calls, so a call reads only what is new (an estimate; 0 turns it off)")
	c.Flags().BoolVar(&events, "events", true, "record the events inside steps (provider requests and responses, tool invocations; secrets redacted) of agents whose file does not set observe.events")
	return c
}

// gcPercent returns the collector's target (GOGC) in effect.
func gcPercent() int {
	pct := debug.SetGCPercent(100)
	debug.SetGCPercent(pct)
	return pct
}

// listen serves the runtime's engine until ctx is done.
func (e *env) listen(ctx context.Context, rt *runtime, addr string, tokens []string) error {
	names := []string{}
	for _, a := range rt.eng.Agents() {
		names = append(names, a.Name)
	}
	cache := "off"
	switch {
	case e.viewCache == 0:
		cache = fmt.Sprintf("%d MiB", server.DefaultViewCacheBytes>>20)
	case e.viewCache > 0:
		cache = fmt.Sprintf("%d MiB", e.viewCache>>20)
	}
	fmt.Fprintf(e.stdout, "Stepwise serving http://%s/  (agents: %s; database %s; view cache %s; GC percent %d)\n", addr, strings.Join(names, ", "), e.db, cache, gcPercent())
	workers, closeWorkers, err := e.workers(rt)
	if err != nil {
		return err
	}
	defer closeWorkers()
	def := "" // the A2A root card's agent: the first agent file's
	if len(rt.loaded) > 0 {
		def = rt.loaded[0].Agent.Name
	}
	return server.ListenAndServe(ctx, addr, server.Config{Engine: rt.eng, Tokens: tokens, Judges: rt.judges, SearchEmbedder: rt.embedder,
		ViewCacheBytes: e.viewCache, StoreTimeout: storeTimeout(e.storeTimeout), Workers: workers, A2ADefaultAgent: def})
}

// workers returns the worker service of serve: agents registered by
// worker processes are built like agent files, with what a worker may not
// register refused (agentload.FromWorkerDefinition).
func (e *env) workers(rt *runtime) (*worker.Service, func(), error) {
	var mu sync.Mutex
	var loaded []*agentload.Loaded
	svc, err := worker.New(worker.Config{Engine: rt.eng, Lease: e.workerLease,
		Build: func(ctx context.Context, def json.RawMessage) (*stepwise.Agent, error) {
			l, err := agentload.FromWorkerDefinition(ctx, def, agentload.Options{Store: rt.st, Events: e.events, Embedder: rt.embedder})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			loaded = append(loaded, l)
			mu.Unlock()
			return l.Agent, nil
		}})
	if err != nil {
		return nil, nil, err
	}
	return svc, func() {
		_ = svc.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, l := range loaded {
			_ = l.Close()
		}
	}, nil
}

func collectTokens(flagTokens []string, file string) ([]string, error) {
	toks := append([]string(nil), flagTokens...)
	if env := os.Getenv("STEPWISE_TOKENS"); env != "" {
		for _, t := range strings.Split(env, ",") {
			if t = strings.TrimSpace(t); t != "" {
				toks = append(toks, t)
			}
		}
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				toks = append(toks, l)
			}
		}
	}
	return toks, nil
}

// agentFilesIn lists DIR/*/agent.{yaml,yml,json} and DIR/*.agent.{yaml,yml,json}.
func agentFilesIn(dir string) ([]string, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--agents %s: not a directory", dir)
	}
	var out []string
	for _, ext := range []string{"yaml", "yml", "json"} {
		a, _ := filepath.Glob(filepath.Join(dir, "*", "agent."+ext))
		b, _ := filepath.Glob(filepath.Join(dir, "*.agent."+ext))
		out = append(out, a...)
		out = append(out, b...)
	}
	sort.Strings(out)
	return out, nil
}

// storeTimeout turns --store-timeout into server.Config.StoreTimeout: 0
// (wait) becomes negative, the config's "no bound".
func storeTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
