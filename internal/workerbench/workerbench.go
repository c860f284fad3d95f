// Package workerbench measures steps served by worker processes
// (docs/workers.md) over the HTTP protocol on loopback: the latency a
// worker step adds over a Go handler step in the same run, and worker steps
// per second under load. It backs `stepwise bench workers` and is reported
// in docs/PERFORMANCE.md.
package workerbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/bench"
	"github.com/stepwise-run/stepwise/internal/workertest"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
	"github.com/stepwise-run/stepwise/worker"
)

// Config configures Run: the cost of a step served by a worker
// process (docs/workers.md) over the HTTP protocol on loopback.
type Config struct {
	// Store is the store to measure on (closed by the caller); Name names
	// it in the result.
	Store store.Store
	Name  string
	// Cycles is the number of Go-handler steps and of worker steps of the
	// latency run, interleaved in one run (default 200, after 10 of each
	// as a warm-up).
	Cycles int
	// Workers, Concurrency, Runs and Steps shape the load: Workers worker
	// clients, each working on up to Concurrency tasks at once, serve Runs
	// concurrent runs of Steps worker steps each (default 10, 4, 100, 10).
	Workers, Concurrency, Runs, Steps int
}

func (c Config) withDefaults() Config {
	if c.Cycles <= 0 {
		c.Cycles = 200
	}
	if c.Workers <= 0 {
		c.Workers = 10
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Runs <= 0 {
		c.Runs = 100
	}
	if c.Steps <= 0 {
		c.Steps = 10
	}
	return c
}

// Result is one measured store, in the JSON shape of `stepwise
// bench workers --json`. The latencies are of one cycle through a step: from
// the start of the Go step before it to the start of the Go step after it,
// so both include two commits; Added is the worker step's minus the Go
// handler step's.
type Result struct {
	Store       string  `json:"store"`
	CPU         string  `json:"cpu"`
	Cycles      int     `json:"cycles"`
	GoP50US     float64 `json:"go_step_p50_us"`
	GoP95US     float64 `json:"go_step_p95_us"`
	WorkerP50US float64 `json:"worker_step_p50_us"`
	WorkerP95US float64 `json:"worker_step_p95_us"`
	AddedP50US  float64 `json:"added_p50_us"`
	AddedP95US  float64 `json:"added_p95_us"`
	Workers     int     `json:"workers"`
	Concurrency int     `json:"concurrency"`
	Runs        int     `json:"runs"`
	Steps       int     `json:"steps_per_run"`
	LoadSeconds float64 `json:"load_seconds"`
	StepsPerS   float64 `json:"worker_steps_per_s"`
}

func (r *Result) String() string {
	return fmt.Sprintf("%-8s worker step p50 %.0f µs p95 %.0f µs | Go step p50 %.0f µs p95 %.0f µs | added p50 %.0f µs p95 %.0f µs (%d cycles each)\n"+
		"%-8s %d workers × %d tasks at once, %d runs × %d worker steps: %.0f worker steps/s (%.2f s)\n"+
		"%-8s CPU %s",
		r.Store, r.WorkerP50US, r.WorkerP95US, r.GoP50US, r.GoP95US, r.AddedP50US, r.AddedP95US, r.Cycles,
		r.Store, r.Workers, r.Concurrency, r.Runs, r.Steps, r.StepsPerS, r.LoadSeconds, r.Store, r.CPU)
}

// The agents of the benchmark.
const (
	latencyAgent = "bench-latency"
	loadAgent    = "bench-load"
	warmup       = 10
)

// cycles records, per run, the start of each Go step "g" and what the
// cycle since the previous one went through ("h": a Go handler step, "w": a
// worker step).
type cycles struct {
	mu      sync.Mutex
	n       int
	runs    map[string]*cycleRun
	samples map[string][]time.Duration
}

type cycleRun struct {
	count int
	last  time.Time
	via   string
}

// g is the Go step that times the cycles and alternates them.
func (c *cycles) g(_ context.Context, sc *stepwise.Scope) (*stepwise.Next, error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[sc.Run().ID]
	if r == nil {
		r = &cycleRun{}
		c.runs[sc.Run().ID] = r
	}
	if r.via != "" && r.count > 2*warmup {
		c.samples[r.via] = append(c.samples[r.via], now.Sub(r.last))
	}
	r.count++
	r.last = now
	if r.count > 2*(c.n+warmup) {
		return &stepwise.Next{Step: stepwise.StepEnd}, nil
	}
	r.via = "h"
	if r.count%2 == 0 {
		r.via = "w"
	}
	return &stepwise.Next{Step: r.via}, nil
}

// Run measures, on one store, the latency a worker step adds over a
// Go handler step in the same run, and the worker steps per second of a
// load of concurrent runs served by several workers. The server is the
// real HTTP server with the worker service, on a loopback port; the
// workers are Go clients of the HTTP protocol (internal/workertest).
func Run(ctx context.Context, c Config) (*Result, error) {
	c = c.withDefaults()
	cy := &cycles{n: c.Cycles, runs: map[string]*cycleRun{}, samples: map[string][]time.Duration{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := stepwise.New(stepwise.Config{Store: c.Store, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	build := func(_ context.Context, def json.RawMessage) (*stepwise.Agent, error) {
		var d struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(def, &d); err != nil {
			return nil, err
		}
		a := &stepwise.Agent{Name: d.Name, Limits: stepwise.Limits{MaxSteps: 1 << 20}}
		switch d.Name {
		case latencyAgent:
			a.StartStep = "g"
			a.Steps = map[string]stepwise.Handler{"g": stepwise.StepFunc(cy.g), "h": stepwise.StepFunc(func(context.Context, *stepwise.Scope) (*stepwise.Next, error) {
				return &stepwise.Next{Step: "g"}, nil
			})}
		case loadAgent:
			a.StartStep = "w"
		default:
			return nil, fmt.Errorf("no agent %q in the benchmark", d.Name)
		}
		return a, nil
	}
	svc, err := worker.New(worker.Config{Engine: eng, Build: build, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	srv, err := server.New(server.Config{Engine: eng, Workers: svc, Logger: logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}
	go func() { _ = hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = hs.Shutdown(sctx)
	}()
	url := "http://" + ln.Addr().String()
	// Keep-alive connections for every worker's polls and reports.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * c.Workers * c.Concurrency}}
	wctx, stopWorkers := context.WithCancel(ctx)
	var served sync.WaitGroup
	defer func() {
		stopWorkers()
		served.Wait()
	}()
	serve := func(w *workertest.Worker, agent string, parallel int, h workertest.Handler) {
		served.Go(func() { w.Serve(wctx, []string{agent}, parallel, 5*time.Second, h, nil) })
	}

	// 1. Latency: one run alternating g → h → g → w → g …
	lw := &workertest.Worker{URL: url, ID: "bench-latency", Client: client}
	if _, err := lw.Register(ctx, &wire.WorkerAgent{Definition: json.RawMessage(`{"name":"` + latencyAgent + `"}`),
		Steps: []*wire.WorkerStep{{Name: "w", Next: []string{"g"}}}}); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	serve(lw, latencyAgent, 1, func(context.Context, *workertest.Worker, *wire.Task) workertest.Finish {
		return workertest.Finish{Complete: &wire.TaskComplete{Next: "g"}}
	})
	r, err := eng.Wait(ctx, eng.Run(ctx, stepwise.StartParams{Agent: latencyAgent, Input: "latency"}))
	if err != nil {
		return nil, err
	}
	if r.Status != steptype.RunCompleted {
		return nil, fmt.Errorf("the latency run is %s: %+v", r.Status, r.Error)
	}
	res := &Result{Store: c.Name, CPU: bench.CPUModel(), Cycles: c.Cycles, Workers: c.Workers, Concurrency: c.Concurrency, Runs: c.Runs, Steps: c.Steps}
	hq, wq := quantiles(cy.samples["h"]), quantiles(cy.samples["w"])
	res.GoP50US, res.GoP95US, res.WorkerP50US, res.WorkerP95US = hq[0], hq[1], wq[0], wq[1]
	res.AddedP50US, res.AddedP95US = wq[0]-hq[0], wq[1]-hq[1]

	// 2. Load: Runs concurrent runs of Steps worker steps, Workers workers.
	def := &wire.WorkerAgent{Definition: json.RawMessage(`{"name":"` + loadAgent + `"}`), Steps: []*wire.WorkerStep{{Name: "w", Next: []string{"w", "end"}}}}
	steps := c.Steps
	load := func(_ context.Context, _ *workertest.Worker, t *wire.Task) workertest.Finish {
		var st struct {
			N int `json:"n"`
		}
		_ = json.Unmarshal(t.Input.State, &st)
		next := "w"
		if st.N+1 >= steps {
			next = stepwise.StepEnd
		}
		return workertest.Finish{Complete: &wire.TaskComplete{Next: next, State: json.RawMessage(fmt.Sprintf(`{"n":%d}`, st.N+1))}}
	}
	for i := range c.Workers {
		w := &workertest.Worker{URL: url, ID: fmt.Sprintf("bench-load-%d", i), Client: client}
		if _, err := w.Register(ctx, def); err != nil {
			return nil, fmt.Errorf("register: %w", err)
		}
		serve(w, loadAgent, c.Concurrency, load)
	}
	start := time.Now()
	errs := make([]error, c.Runs)
	var wg sync.WaitGroup
	for i := range c.Runs {
		wg.Go(func() {
			r, err := eng.Wait(ctx, eng.Run(ctx, stepwise.StartParams{Agent: loadAgent, Input: "load", State: map[string]int{"n": 0}}))
			switch {
			case err != nil:
				errs[i] = err
			case r.Status != steptype.RunCompleted:
				errs[i] = fmt.Errorf("a load run is %s: %+v", r.Status, r.Error)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res.LoadSeconds = elapsed.Seconds()
	res.StepsPerS = float64(c.Runs*c.Steps) / elapsed.Seconds()
	return res, nil
}

// quantiles returns the p50 and p95 of ds in microseconds.
func quantiles(ds []time.Duration) [2]float64 {
	if len(ds) == 0 {
		return [2]float64{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 1e3
	}
	return [2]float64{at(0.50), at(0.95)}
}
