// Package bench measures the engine's per-step overhead: the standard agent
// loop (the model asks for one tool, the tool answers, repeat) on a
// zero-latency scripted model, over a chosen store. It backs `stepwise
// bench` and is reported in docs/PERFORMANCE.md.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// Config selects a benchmark.
type Config struct {
	Store       string // "memory", "sqlite" or "postgres"
	Steps       int    // steps per run (default 10,000)
	Runs        int    // concurrent runs (default 1)
	Dir         string // directory for the SQLite file (default a temp dir)
	Synchronous string // SQLite synchronous mode (default NORMAL)
	// Model, when set, replaces the scripted model (e.g. an OpenAI-compatible
	// provider pointed at a local fake server); it must follow the loop.
	Model func(steps int) llm.Model
	// Open opens the store; required unless OpenGroupCommit is set (the
	// CLI passes its DSN opener).
	Open func(ctx context.Context, kind, path, sync string) (store.Store, error)
	// OpenGroupCommit, when set, opens the store instead of Open: a store
	// that reports its group commits, counted into Result.Commits and
	// Result.Appends (the CLI passes it for postgres).
	OpenGroupCommit func(ctx context.Context) (GroupCommitter, error)
	// Floor, when set on the sqlite store, measures the raw cost of one
	// step's transaction on the benchmark's database file after the run
	// (the CLI passes sqlite.Floor); n is the number of transactions.
	Floor func(ctx context.Context, path, sync string, n int) (time.Duration, error)
	// FloorMinimal, with Floor, measures the same transaction on the
	// minimal schema (the rows alone, no trigger or extra index) in a file
	// of its own (the CLI passes sqlite.FloorMinimal).
	FloorMinimal func(ctx context.Context, path, sync string, n int) (time.Duration, error)
}

// Result is one measured configuration, in the JSON shape of `stepwise bench --json`.
type Result struct {
	Store         string  `json:"store"`
	Runs          int     `json:"runs"`
	Steps         int     `json:"steps"`
	PerStepUS     float64 `json:"per_step_us"`
	FirstDecileUS float64 `json:"first_decile_us"`
	LastDecileUS  float64 `json:"last_decile_us"`
	StepsPerS     float64 `json:"steps_per_s"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Synchronous   string  `json:"synchronous,omitempty"`
	Model         string  `json:"model,omitempty"`
	AllocsPerStep float64 `json:"allocs_per_step"`
	BytesPerStep  float64 `json:"bytes_per_step"`
	// FloorUS is the raw cost of one step's transaction (--floor), measured
	// in the same process right after the run; Ratio is PerStepUS/FloorUS.
	FloorUS float64 `json:"floor_us,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	// CPUPerStepUS and FloorCPUUS are the process CPU time (user+system)
	// per step and per floor transaction; CPURatio is their ratio, the
	// steadier figure on a loaded machine (it leaves out I/O waits).
	CPUPerStepUS float64 `json:"cpu_per_step_us"`
	FloorCPUUS   float64 `json:"floor_cpu_us,omitempty"`
	CPURatio     float64 `json:"cpu_ratio,omitempty"`
	// MinimalFloorUS and MinimalFloorCPUUS are the floor on the minimal
	// schema (--floor); MinimalRatio and MinimalCPURatio the engine's step
	// against it.
	MinimalFloorUS    float64 `json:"minimal_floor_us,omitempty"`
	MinimalRatio      float64 `json:"minimal_ratio,omitempty"`
	MinimalFloorCPUUS float64 `json:"minimal_floor_cpu_us,omitempty"`
	MinimalCPURatio   float64 `json:"minimal_cpu_ratio,omitempty"`
	// Commits and Appends, for a store that groups appends into shared
	// transactions (PostgreSQL): the transactions that committed
	// StepAppend calls during the run, and the calls they committed.
	Commits int64 `json:"commits,omitempty"`
	Appends int64 `json:"appends,omitempty"`
	// ServerCPUPerStepUS, for a store whose server runs on this host and
	// reports its CPU time (ServerCPUReporter): the server's CPU time
	// (all its processes, user + system) per step during the run, set-up
	// and tear-down left out.
	ServerCPUPerStepUS float64 `json:"server_cpu_per_step_us,omitempty"`
	// GCPercent is the garbage collector's target (GOGC) the run had:
	// garbage collection is a large part of CPUPerStepUS.
	GCPercent int `json:"gc_percent"`
}

// GroupCommitter is a store that reports its group commits (see
// postgres.Store.GroupCommitStats).
type GroupCommitter interface {
	store.Store
	GroupCommitStats() (commits, appends int64)
}

// ServerCPUReporter is a store that can read the CPU time its server has
// used so far (PostgreSQL on the same host); ok is false when it cannot.
type ServerCPUReporter interface {
	ServerCPU() (cpu time.Duration, ok bool)
}

// open opens the store, returning it as a GroupCommitter too when it was
// opened by OpenGroupCommit.
func (c *Config) open(ctx context.Context, path string) (store.Store, GroupCommitter, error) {
	if c.OpenGroupCommit != nil {
		gc, err := c.OpenGroupCommit(ctx)
		if err != nil {
			return nil, nil, err
		}
		return gc, gc, nil
	}
	st, err := c.Open(ctx, c.Store, path, c.Synchronous)
	return st, nil, err
}

type echoArgs struct {
	N int `json:"n"`
}

// Run executes the benchmark.
func Run(ctx context.Context, c Config) (*Result, error) {
	if c.Steps <= 0 {
		c.Steps = 10000
	}
	if c.Runs <= 0 {
		c.Runs = 1
	}
	if c.Store == "" {
		c.Store = "memory"
	}
	if c.Store == "sqlite" && c.Synchronous == "" {
		c.Synchronous = "NORMAL"
	}
	path := ""
	if c.Store == "sqlite" {
		dir := c.Dir
		if dir == "" {
			d, err := os.MkdirTemp("", "stepwise-bench-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		path = filepath.Join(dir, fmt.Sprintf("bench-%d.db", time.Now().UnixNano()))
	}
	st, gc, err := c.open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// Each loop iteration commits two steps (llm + tool); the user step and
	// the final answer add two.
	iterations := max(0, (c.Steps-2)/2)
	var model llm.Model = scripted.Loop("echo", `{"n":1}`, iterations, "done")
	if c.Model != nil {
		model = c.Model(iterations)
	}
	echo := tool.New("echo", "returns its argument", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	agent := &stepwise.Agent{Name: "bench", Model: model, Tools: []tool.Tool{echo},
		Limits: stepwise.Limits{MaxSteps: c.Steps + 10}}
	eng, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	runs := make([]*stepwise.Run, c.Runs)
	for i := range runs {
		if runs[i], err = eng.StartRun(ctx, stepwise.StartParams{Agent: "bench", Input: "go"}); err != nil {
			return nil, err
		}
	}
	times := make([][]time.Time, c.Runs)
	errs := make([]error, c.Runs)
	var wg sync.WaitGroup
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var commits0, appends0 int64
	if gc != nil {
		commits0, appends0 = gc.GroupCommitStats()
	}
	srv, _ := st.(ServerCPUReporter)
	var srv0 time.Duration
	srvOK := srv != nil
	if srvOK {
		srv0, srvOK = srv.ServerCPU()
	}
	cpu0 := cpuTime()
	start := time.Now()
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := make([]time.Time, 0, c.Steps+4)
			ts = append(ts, time.Now())
			for ev, err := range eng.Execute(ctx, r.ID) {
				if err != nil {
					errs[i] = err
					return
				}
				if ev.Type == stepwise.EventStepCompleted {
					ts = append(ts, time.Now())
				}
				if ev.Type == stepwise.EventRunFinished && ev.Run.Status != stepwise.RunStatus("completed") {
					errs[i] = fmt.Errorf("run %s %s", ev.Run.ID, ev.Run.Status)
				}
			}
			times[i] = ts
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	var srvCPU time.Duration
	if srvOK {
		var srv1 time.Duration
		srv1, srvOK = srv.ServerCPU()
		srvCPU = srv1 - srv0
	}
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	total := 0
	for _, ts := range times {
		total += len(ts) - 1
	}
	res := &Result{Store: c.Store, Runs: c.Runs, Steps: total / c.Runs, Synchronous: c.Synchronous, Model: model.Name()}
	res.StepsPerS = float64(total) / elapsed.Seconds()
	res.PerStepUS = float64(elapsed.Microseconds()) / float64(total) * float64(c.Runs)
	ts := times[0]
	n := len(ts) - 1
	if d := n / 10; d > 0 {
		res.FirstDecileUS = float64(ts[d].Sub(ts[0]).Microseconds()) / float64(d)
		res.LastDecileUS = float64(ts[n].Sub(ts[n-d]).Microseconds()) / float64(d)
	}
	res.CPUPerStepUS = float64(cpu.Nanoseconds()) / 1e3 / float64(total)
	if srvOK {
		res.ServerCPUPerStepUS = float64(srvCPU.Nanoseconds()) / 1e3 / float64(total)
	}
	res.AllocsPerStep = float64(m1.Mallocs-m0.Mallocs) / float64(total)
	res.BytesPerStep = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(total)
	res.PeakRSSMB = peakRSSMB()
	res.GCPercent = debug.SetGCPercent(-1) // reads it (and stops the collector for a moment)
	debug.SetGCPercent(res.GCPercent)
	if gc != nil {
		commits, appends := gc.GroupCommitStats()
		res.Commits, res.Appends = commits-commits0, appends-appends0
	}
	if c.Floor != nil && c.Store == "sqlite" {
		// The floor runs on the same file, so its tables and indexes hold
		// the same rows; the engine and the store must be closed first.
		eng.Close()
		if err := st.Close(); err != nil {
			return nil, err
		}
		n := min(total, 5000)
		fcpu0 := cpuTime()
		f, err := c.Floor(ctx, path, c.Synchronous, n)
		if err != nil {
			return nil, err
		}
		res.FloorCPUUS = float64((cpuTime() - fcpu0).Nanoseconds()) / 1e3 / float64(n)
		if res.FloorCPUUS > 0 {
			res.CPURatio = res.CPUPerStepUS / res.FloorCPUUS
		}
		res.FloorUS = float64(f.Nanoseconds()) / 1e3
		res.Ratio = res.PerStepUS / res.FloorUS
		if c.FloorMinimal != nil {
			mcpu0 := cpuTime()
			m, err := c.FloorMinimal(ctx, path, c.Synchronous, n)
			if err != nil {
				return nil, err
			}
			res.MinimalFloorCPUUS = float64((cpuTime() - mcpu0).Nanoseconds()) / 1e3 / float64(n)
			if res.MinimalFloorCPUUS > 0 {
				res.MinimalCPURatio = res.CPUPerStepUS / res.MinimalFloorCPUUS
			}
			res.MinimalFloorUS = float64(m.Nanoseconds()) / 1e3
			res.MinimalRatio = res.PerStepUS / res.MinimalFloorUS
		}
	}
	return res, nil
}

// peakRSSMB reads the process's peak resident set (VmHWM) on Linux; on
// other systems it falls back to the Go runtime's view of obtained memory.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					kb, _ := strconv.ParseFloat(f[1], 64)
					return kb / 1024
				}
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.Sys) / (1 << 20)
}
