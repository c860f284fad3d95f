package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/bench"
	"github.com/stepwise-run/stepwise/server"
)

// benchFillCmd: stepwise bench fill, a realistic big database.
func benchFillCmd(e *env) *cobra.Command {
	var c bench.FillConfig
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "fill --db DB [--steps N] [--sessions N] [--agents N] [--seed N] [--long-session N]",
		Short: "Fill a database with a realistic synthetic history (for bench queries)",
		Long: `Write --steps steps over --sessions sessions of --agents agents through the
store's importer: user turns, model calls asking for tools, tool results and
answers of realistic sizes, one run per turn (about 3% failed), about 5% of
sessions forked from an earlier one, session metadata, evals on about 10% of
runs and lexical vectors of the user steps, spread over the last 60 days.
--long-session N adds one session of N steps (agent-0, titled "long session
(bench fill)"), written in chunks; with --sessions 0 it is the only one
written, so it can be added to a filled database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd.Context(), e.db, false)
			if err != nil {
				return err
			}
			defer st.Close()
			last := time.Now()
			c.Progress = func(n int) {
				if !jsonOut && time.Since(last) > 5*time.Second {
					last = time.Now()
					fmt.Fprintf(e.stderr, "  %d steps\n", n)
				}
			}
			r, err := bench.Fill(cmd.Context(), st, c)
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(r)
			}
			fmt.Fprintf(e.stdout, "filled %d steps, %d sessions (%d forks), %d runs (%d failed), %d evals, %d vectors over %d agents in %s (%.0f steps/s)\n",
				r.Steps, r.Sessions, r.Forks, r.Runs, r.Failed, r.Evals, r.Vectors, len(r.Agents), r.Elapsed.Round(time.Millisecond), float64(r.Steps)/r.Elapsed.Seconds())
			if r.LongSessionID != "" {
				fmt.Fprintf(e.stdout, "long session %s\n", r.LongSessionID)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&c.Steps, "steps", 1000000, "total steps")
	cmd.Flags().IntVar(&c.Sessions, "sessions", 10000, "sessions")
	cmd.Flags().IntVar(&c.Agents, "agents", 5, "agents")
	cmd.Flags().Int64Var(&c.Seed, "seed", 1, "random seed")
	cmd.Flags().IntVar(&c.LongSession, "long-session", 0, "add one session of this many steps")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object")
	return cmd
}

// queryTiming is one measured query of bench queries.
type queryTiming struct {
	Name  string  `json:"name"`
	Path  string  `json:"path"`
	Calls int     `json:"calls"`
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	MaxMS float64 `json:"max_ms"`
	// CPUMS is the process's CPU time (user+system) per timed call: on a
	// shared machine it moves far less with the load than wall time.
	CPUMS float64 `json:"cpu_ms"`
	Bytes int     `json:"bytes"`
}

// benchQueriesCmd: stepwise bench queries, the read paths of the API and
// dashboard timed on a (big) database.
func benchQueriesCmd(e *env) *cobra.Command {
	var calls, longCalls int
	var jsonOut bool
	var agent, only, cpuProfile, long string
	cmd := &cobra.Command{
		Use:   "queries --db DB [--calls N] [--agent NAME]",
		Short: "Time the API's read paths on a database (p50/p95 warm)",
		Long: `Serve the database through the HTTP API in process and time, warm (one
untimed call first), --calls calls of each read the dashboard makes: the
sessions list first page filtered by agent and status, a session's summary,
a range of 200 steps, the agent overview, the agent workflow graph, the
metrics of the last 30 days and a similarity search for the top 10 steps;
then, on the long session (bench fill --long-session), what opening it
reads: the session, its newest runs, its summary, the first, last and a
middle page of steps and its last step.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := openStore(ctx, e.db, false)
			if err != nil {
				return err
			}
			defer st.Close()
			eng, err := stepwise.New(stepwise.Config{Store: st})
			if err != nil {
				return err
			}
			defer eng.Close()
			srv, err := server.New(server.Config{Engine: eng})
			if err != nil {
				return err
			}
			defer func() { _ = srv.Shutdown(context.Background()) }()
			paths, err := queryPaths(ctx, st, agent, long, time.Now())
			if err != nil {
				return err
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
			var out []*queryTiming
			for _, p := range paths {
				if only != "" && !strings.Contains(p[0], only) {
					continue
				}
				n := calls
				if longCalls > 0 && strings.HasPrefix(p[0], "long") {
					n = longCalls
				}
				t, err := timeQuery(srv, p[0], p[1], n)
				if err != nil {
					return err
				}
				out = append(out, t)
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(map[string]any{"queries": out})
			}
			for _, t := range out {
				fmt.Fprintf(e.stdout, "%-36s p50 %8.2f ms  p95 %8.2f ms  max %8.2f ms  cpu %8.2f ms/call  (%d calls, %d B)\n", t.Name, t.P50MS, t.P95MS, t.MaxMS, t.CPUMS, t.Calls, t.Bytes)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&calls, "calls", 20, "timed calls per query")
	cmd.Flags().IntVar(&longCalls, "long-calls", 0, "timed calls of the long session's reads (default --calls)")
	cmd.Flags().StringVar(&agent, "agent", bench.AgentName(0), "agent the per-agent queries use")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&only, "only", "", "time only the queries whose name contains this")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the timed calls to this file")
	cmd.Flags().StringVar(&long, "long-session", "", `session of the single-session reads (default: the one titled "long session (bench fill)", if any)`)
	return cmd
}

// timeQuery calls GET path once untimed, then calls times, and fails on
// any status but 200.
func timeQuery(h http.Handler, name, path string, calls int) (*queryTiming, error) {
	calls = max(calls, 1)
	t := &queryTiming{Name: name, Path: path, Calls: calls}
	var ds []float64
	var cpu time.Duration
	for i := range calls + 1 {
		req, err := queryRequest(path)
		if err != nil {
			return nil, fmt.Errorf("stepwise: bench queries: %s: %w", path, err)
		}
		rec := &queryRecorder{header: http.Header{}, Code: http.StatusOK}
		start, cpu0 := time.Now(), bench.CPUTime()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if i > 0 {
			cpu += bench.CPUTime() - cpu0
		}
		if rec.Code != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(&rec.Body, 300))
			return nil, fmt.Errorf("stepwise: bench queries: %s: %d %s", path, rec.Code, body)
		}
		if i > 0 {
			ds = append(ds, float64(d.Microseconds())/1000)
		}
		t.Bytes = rec.Body.Len()
	}
	slices.Sort(ds)
	pct := func(p float64) float64 { return ds[min(len(ds)-1, max(0, int(p*float64(len(ds))+0.999999)-1))] }
	t.P50MS, t.P95MS, t.MaxMS = pct(0.5), pct(0.95), ds[len(ds)-1]
	t.CPUMS = float64(cpu.Microseconds()) / 1000 / float64(calls)
	return t, nil
}

// queryRequest is the in-process GET of timeQuery, as a server would have
// read it (the fields httptest.NewRequest sets; the binary does not link
// net/http/httptest).
func queryRequest(path string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, "http://example.com"+path, nil)
	if err != nil {
		return nil, err
	}
	req.RequestURI, req.RemoteAddr = path, "192.0.2.1:1234"
	return req, nil
}

// queryRecorder keeps the status and body a handler writes.
type queryRecorder struct {
	header      http.Header
	Code        int
	Body        bytes.Buffer
	wroteHeader bool
}

func (r *queryRecorder) Header() http.Header { return r.header }

func (r *queryRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.Code, r.wroteHeader = code, true
	}
}

func (r *queryRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.Body.Write(b)
}

func (r *queryRecorder) Flush() { r.WriteHeader(http.StatusOK) }
