package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/wire"
)

// DefaultLatency is Config.Latency's default: about 50 chunks a
// second per stream, the pace of a fast hosted model. `stepwise bench
// --http` uses it too, so its default load is BenchmarkHTTPStreaming's.
const DefaultLatency = 20 * time.Millisecond

// Config configures Run. Zero values take the defaults.
type Config struct {
	// Runs is the number of concurrent runs, each in its own session with
	// its own SSE subscriber. Default 100.
	Runs int
	// Turns is the model calls per run; all but the last ask for a tool,
	// so a run commits 2*Turns steps. Default 8 (with the other defaults a
	// run streams for about 1.6s, so all runs stream at the same time).
	Turns int
	// Deltas is the streamed deltas per model call. Default 10.
	Deltas int
	// Latency is the model's delay before each delta (±50%). Default
	// DefaultLatency.
	Latency time.Duration
	// Ramp spreads the starts of the runs evenly over this duration, as
	// users do not all press enter in the same millisecond. Default: one
	// model call (Deltas × Latency).
	Ramp time.Duration
	// Burst starts every run at once instead (the worst case).
	Burst bool
	// Store backs the engine (required; Run does not close it). The
	// caller chooses the driver, as everywhere in the serving layer: the
	// CLI and the benchmark pass a new in-memory store.
	Store store.Store
	// Logger receives server and engine errors. Default: discarded.
	Logger *slog.Logger
	// ClientCommand, if set, runs the subscribers in a process of their
	// own: the command (program and arguments) is started with
	// ClientEnv set, and must call ClientMain. The kernel then
	// schedules server and clients as it would on separate machines;
	// without it (nil) they share the server's process and Go scheduler,
	// where goroutines woken by the network poller wait behind the runs'.
	ClientCommand []string
	// GCPercent is the collector's target during the run (TuneGC): 0 is
	// DefaultGCPercent, what `stepwise serve` runs with; GOGC in the
	// environment overrides it.
	GCPercent int
}

// Result is what Run measured.
type Result struct {
	Runs       int           `json:"runs"`
	Steps      int64         `json:"steps"`  // committed steps seen by the subscribers
	Deltas     int64         `json:"deltas"` // step_delta events seen by the subscribers
	Elapsed    time.Duration `json:"elapsed_ns"`
	StepsPerS  float64       `json:"steps_per_s"`
	DeltasPerS float64       `json:"deltas_per_s"`
	// Delivery latency: from the model yielding a delta to the subscriber
	// parsing it, through the engine, the SSE writer and loopback TCP.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// PeakHeapMB is the peak of live heap objects sampled during the run.
	PeakHeapMB float64 `json:"peak_heap_mb"`
	// PeakGoroutines is the peak goroutine count of the server's process
	// (the clients' included when they run in it).
	PeakGoroutines int `json:"peak_goroutines"`
	// CPUPerEvent is the process CPU time (user and system) spent per
	// delivered event (delta or step), engine, server and subscribers
	// together: a measure that holds on a busy machine, where latency does
	// not. Zero where not measured.
	CPUPerEvent time.Duration `json:"cpu_per_event_ns"`
	// ServerCPUPerEvent is the CPU of the server's process alone (engine,
	// server, model) per event, what a deployment pays: CPUPerEvent less
	// the clients'. Measured only with the clients in their own process
	// (ClientProcess); zero otherwise.
	ServerCPUPerEvent time.Duration `json:"server_cpu_per_event_ns"`
	// ClientProcess reports that the subscribers ran in a process of
	// their own (Config.ClientCommand).
	ClientProcess bool `json:"client_process"`
	// GC is what the server process's collector did while the runs ran.
	GC GCStats `json:"gc"`
}

// GCStats is the work of the collector of Run's process during the
// runs (from runtime/metrics: the CPU figures are the runtime's estimates,
// updated as each cycle ends, so a cycle still marking when the runs end
// is not in them).
type GCStats struct {
	// Cycles is the number of collections completed.
	Cycles int `json:"cycles"`
	// MarkCPU is the CPU time of their mark phases (assists, dedicated,
	// fractional and idle workers); AssistCPU the part of it charged to
	// goroutines that allocated during a mark phase (the runs and
	// handlers among them).
	MarkCPU   time.Duration `json:"mark_cpu_ns"`
	AssistCPU time.Duration `json:"assist_cpu_ns"`
	// PeakLiveMB is the most heap one of those collections marked live,
	// PeakStacksMB the most goroutine stack one of them scanned (both
	// sampled as Run samples the heap; 0 without a collection).
	PeakLiveMB   float64 `json:"peak_live_mb"`
	PeakStacksMB float64 `json:"peak_stacks_mb"`
}

// String summarizes the result on one line.
func (r *Result) String() string {
	clients := "clients in process"
	if r.ClientProcess {
		clients = fmt.Sprintf("clients in their own process, server %s CPU/event", r.ServerCPUPerEvent.Round(100*time.Nanosecond))
	}
	return fmt.Sprintf("%d runs, %d steps, %d deltas in %s: %.0f steps/s, %.0f deltas/s; delivery p50 %s p99 %s max %s; %s CPU/event (%s); peak heap %.1f MB, %d goroutines",
		r.Runs, r.Steps, r.Deltas, r.Elapsed.Round(time.Millisecond), r.StepsPerS, r.DeltasPerS,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), r.CPUPerEvent.Round(100*time.Nanosecond), clients, r.PeakHeapMB, r.PeakGoroutines) +
		fmt.Sprintf("; %d GC cycles, mark %s CPU (assists %s), live %.1f MB, stacks %.1f MB",
			r.GC.Cycles, r.GC.MarkCPU.Round(100*time.Microsecond), r.GC.AssistCPU.Round(100*time.Microsecond), r.GC.PeakLiveMB, r.GC.PeakStacksMB)
}

func (c Config) withDefaults() Config {
	if c.Runs <= 0 {
		c.Runs = 100
	}
	if c.Turns <= 0 {
		c.Turns = 8
	}
	if c.Deltas <= 0 {
		c.Deltas = 10
	}
	if c.Latency == 0 {
		c.Latency = DefaultLatency
	}
	if c.Ramp <= 0 {
		c.Ramp = time.Duration(c.Deltas) * c.Latency
	}
	if c.Burst {
		c.Ramp = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.GCPercent == 0 {
		c.GCPercent = DefaultGCPercent
	}
	return c
}

// Run measures streaming over HTTP on loopback: it starts an engine and
// a server on 127.0.0.1, creates Runs sessions and connects an SSE
// subscriber to each, then starts a run in every session (spread over
// Ramp), on a model that stamps each delta with the time it was produced. It reports
// steps/s, the delivery latency of deltas (model to subscriber) and memory.
// The subscribers run in the same process and count against the same CPUs,
// unless ClientCommand starts them in a process of their own.
// It backs BenchmarkHTTPStreaming and `stepwise bench --http`.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	defer TuneGC(cfg.GCPercent)()
	st := cfg.Store
	if st == nil {
		return nil, errors.New("loadgen: Run needs a store (Config.Store)")
	}
	noop := tool.Func(loadToolDef, func(context.Context, *tool.Call) (*tool.Result, error) { return &tool.Result{Content: "ok"}, nil })
	eng, err := stepwise.New(stepwise.Config{Store: st, Workers: cfg.Runs, Logger: cfg.Logger,
		Agents: []*stepwise.Agent{{Name: "load", Model: &loadModel{turns: cfg.Turns, deltas: cfg.Deltas, latency: cfg.Latency}, Tools: []tool.Tool{noop}}}})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	srv, err := server.New(server.Config{Engine: eng, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("load: listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ConnContext: server.ConnContext}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	var peakHeap, peakG atomic.Int64
	var peakGC gcPeaks
	peakGC.after.Store(math.MaxUint64) // nothing recorded until the runs start
	stopSampling := sampleMemory(&peakHeap, &peakG, &peakGC)
	defer stopSampling()
	cc := loadClientConfig{Base: "http://" + ln.Addr().String(), Runs: cfg.Runs, Turns: cfg.Turns, Deltas: cfg.Deltas, Ramp: cfg.Ramp}
	var cpu0 time.Duration
	var gc0 gcCounters
	start := func() { cpu0 = processCPU(); gc0 = readGC(); peakGC.after.Store(gc0.cycles) }
	var out *loadClientResult
	if len(cfg.ClientCommand) > 0 {
		out, err = runClientProcess(ctx, cfg.ClientCommand, cc, start)
	} else {
		out, err = runLoadClients(ctx, cc, start)
		if out != nil {
			out.CPU = 0 // counted in this process's time
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	serverCPU := processCPU() - cpu0
	gc := readGC().since(gc0)
	stopSampling()
	all := out.Lats
	slices.Sort(all)
	res := &Result{Runs: cfg.Runs, Steps: out.Steps, Deltas: out.Deltas, Elapsed: out.Elapsed,
		PeakHeapMB: float64(peakHeap.Load()) / (1 << 20), PeakGoroutines: int(peakG.Load()),
		ClientProcess: len(cfg.ClientCommand) > 0, GC: gc}
	res.GC.PeakLiveMB = float64(peakGC.live.Load()) / (1 << 20)
	res.GC.PeakStacksMB = float64(peakGC.stacks.Load()) / (1 << 20)
	res.StepsPerS = float64(res.Steps) / res.Elapsed.Seconds()
	res.DeltasPerS = float64(res.Deltas) / res.Elapsed.Seconds()
	if n := res.Steps + res.Deltas; n > 0 && serverCPU > 0 {
		res.CPUPerEvent = (serverCPU + out.CPU) / time.Duration(n)
		if res.ClientProcess {
			res.ServerCPUPerEvent = serverCPU / time.Duration(n)
		}
	}
	if n := len(all); n > 0 {
		res.P50, res.P99, res.Max = all[n/2], all[min(n-1, n*99/100)], all[n-1]
	}
	return res, nil
}

// loadClientConfig is what the subscribers of Run need to know; a
// client process reads it as JSON.
type loadClientConfig struct {
	Base   string        `json:"base"`
	Runs   int           `json:"runs"`
	Turns  int           `json:"turns"`
	Deltas int           `json:"deltas"`
	Ramp   time.Duration `json:"ramp"`
}

// loadClientResult is what the subscribers measured; a client process
// writes it as JSON.
type loadClientResult struct {
	Steps   int64           `json:"steps"`
	Deltas  int64           `json:"deltas"`
	Elapsed time.Duration   `json:"elapsed"`
	Lats    []time.Duration `json:"lats"`
	CPU     time.Duration   `json:"cpu"` // of the client process, from ready to the end
	Err     string          `json:"err,omitempty"`
}

// runLoadClients connects a subscriber to a new session per run, calls
// ready once all are connected, then starts every run (spread over Ramp)
// and reads each stream until its run finished, each on a goroutine of its
// own through net/http. The latencies come back in no particular order.
func runLoadClients(ctx context.Context, cfg loadClientConfig, ready func()) (*loadClientResult, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * cfg.Runs, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	// Phase 1: every subscriber connects. Phase 2, once all are connected:
	// every run starts.
	streams := make([]*loadStream, cfg.Runs)
	err := forEachLimited(cfg.Runs, 64, func(i int) error { // bound the connection storm
		st, err := connectLoad(ctx, hc, cfg.Base)
		streams[i] = st
		return err
	})
	defer func() {
		for _, st := range streams {
			if st != nil {
				st.body.Close()
			}
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ready()
	errs := make(chan error, cfg.Runs)
	start := time.Now()
	goRamped(cfg, start, func(i int) {
		if err := streams[i].run(ctx, hc, cfg); err != nil {
			errs <- err
		}
	})()
	elapsed := time.Since(start)
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return nil, err
	}
	checks := make([]*streamCheck, len(streams))
	for i, st := range streams {
		checks[i] = &st.check
	}
	return loadResultOf(checks, elapsed), nil
}

// goRamped calls f(0) … f(cfg.Runs-1), each on a goroutine of its own, the
// i-th once i/cfg.Runs of cfg.Ramp has passed since start, and returns a
// function that waits for all of them to return.
func goRamped(cfg loadClientConfig, start time.Time, f func(i int)) (wait func()) {
	var wg sync.WaitGroup
	for i := range cfg.Runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.Ramp > 0 {
				time.Sleep(time.Until(start.Add(cfg.Ramp * time.Duration(i) / time.Duration(cfg.Runs))))
			}
			f(i)
		}()
	}
	return wg.Wait
}

// forEachLimited calls f(0) … f(n-1), at most limit at a time, and
// returns their errors joined.
func forEachLimited(n, limit int, f func(i int) error) error {
	errs := make(chan error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

// loadResultOf sums what the streams' checks counted and measured.
func loadResultOf(checks []*streamCheck, elapsed time.Duration) *loadClientResult {
	res := &loadClientResult{Elapsed: elapsed}
	n := 0
	for _, c := range checks {
		n += len(c.lats)
	}
	res.Lats = make([]time.Duration, 0, n)
	for _, c := range checks {
		res.Steps += int64(c.nSteps)
		res.Deltas += int64(c.nDeltas)
		res.Lats = append(res.Lats, c.lats...)
	}
	return res
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// loadStream is one session with a connected SSE subscriber.
type loadStream struct {
	sessionID string
	body      io.ReadCloser
	r         *bufio.Reader
	check     streamCheck
}

// connectLoad creates a session and subscribes to it.
func connectLoad(ctx context.Context, hc *http.Client, base string) (*loadStream, error) {
	sid, err := createLoadSession(ctx, hc, base)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+sid+"/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("subscribe: status %d", resp.StatusCode)
	}
	return &loadStream{sessionID: sid, body: resp.Body, r: bufio.NewReaderSize(resp.Body, 8<<10)}, nil
}

// createLoadSession creates a session for one run of the load.
func createLoadSession(ctx context.Context, hc *http.Client, base string) (string, error) {
	var sess stepwise.Session
	if err := loadPost(ctx, hc, base+"/v1/sessions", `{"agent":"load"}`, &sess); err != nil {
		return "", err
	}
	return sess.ID, nil
}

// startLoadRun starts the run of a session and returns its id.
func startLoadRun(ctx context.Context, hc *http.Client, base, sessionID string) (string, error) {
	var created wire.RunCreated
	if err := loadPost(ctx, hc, base+"/v1/runs", `{"agent":"load","input":"go","session_id":"`+sessionID+`"}`, &created); err != nil {
		return "", err
	}
	return created.Run.ID, nil
}

// run starts the session's run and reads the stream until it finishes
// (streamCheck measures and checks each line).
func (l *loadStream) run(ctx context.Context, hc *http.Client, cfg loadClientConfig) error {
	l.check.init(cfg, l.sessionID)
	id, err := startLoadRun(ctx, hc, cfg.Base, l.sessionID)
	if err != nil {
		return err
	}
	l.check.setRun(id)
	for {
		line, err := l.r.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("stream of run %s: %w", id, err)
		}
		if done, err := l.check.line(line); err != nil || done {
			return err
		}
	}
}

var (
	contentStamp = []byte(`"content":"t`)
	completed    = []byte(`"status":"completed"`)
	lineID       = []byte("id: ")
	lineEvent    = []byte("event: ")
	lineData     = []byte("data: ")
	typeDelta    = []byte(stepwise.EventStepDelta)
	typeStep     = []byte(stepwise.EventStepCompleted)
	typeFinished = []byte(stepwise.EventRunFinished)
)

// streamCheck reads a load stream line by line, as any reader of it does.
// It reads only what it needs from each event (the event's id and type, the
// stamp of a delta), so that the measuring client costs little next to the
// server it measures; it records each delta's delivery latency (from its
// stamp to the moment its line is parsed) and checks delivery: event ids
// strictly increasing, every delta's stamp later than the one before (in
// order, none twice), and the run's deltas and steps all there when it
// finishes.
type streamCheck struct {
	turns, deltas int
	session       string
	// run is `"run_id":"ID"` of the stream's run once its creation
	// returned (setRun); a run_finished event for another run is skipped.
	run atomic.Pointer[[]byte]
	// unconfirmed holds a run_finished event read before the run's id was
	// known: confirm checks that it was the run's.
	unconfirmed     []byte
	typ             []byte
	last            stepwise.Position
	stamp           int64
	nDeltas, nSteps int
	lats            []time.Duration
}

func (c *streamCheck) init(cfg loadClientConfig, session string) {
	c.turns, c.deltas, c.session = cfg.Turns, cfg.Deltas, session
	c.lats = make([]time.Duration, 0, cfg.Turns*cfg.Deltas)
}

// setRun names the stream's run; it may be called while line runs on
// another goroutine.
func (c *streamCheck) setRun(id string) {
	b := []byte(`"run_id":"` + id + `"`)
	c.run.Store(&b)
}

// name names the stream in errors: its run, else its session.
func (c *streamCheck) name() string {
	if p := c.run.Load(); p != nil {
		return "run " + strings.TrimSuffix(strings.TrimPrefix(string(*p), `"run_id":"`), `"`)
	}
	return "the run of session " + c.session
}

// line takes one line of the stream (its newline included or not) and
// reports whether the run finished with it.
func (c *streamCheck) line(line []byte) (bool, error) {
	if id, ok := bytes.CutPrefix(line, lineID); ok {
		pos, ok := parsePosition(bytes.TrimSpace(id))
		if !ok || !c.last.Less(pos) {
			return false, fmt.Errorf("stream of %s: event id %q after %d:%d", c.name(), bytes.TrimSpace(id), c.last.Seq, c.last.Idx)
		}
		c.last = pos
		return false, nil
	}
	if t, ok := bytes.CutPrefix(line, lineEvent); ok {
		c.typ = append(c.typ[:0], bytes.TrimSpace(t)...)
		return false, nil
	}
	data, ok := bytes.CutPrefix(line, lineData)
	if !ok {
		return false, nil
	}
	switch {
	case bytes.Equal(c.typ, typeDelta):
		now := time.Now()
		n, ok := int64(0), false
		if i := bytes.Index(data, contentStamp); i >= 0 {
			rest := data[i+len(contentStamp):]
			if j := bytes.IndexByte(rest, '|'); j > 0 {
				n, ok = parseStamp(rest[:j])
			}
		}
		if !ok || n <= c.stamp {
			return false, fmt.Errorf("stream of %s: delta %q out of order (stamp %d after %d)", c.name(), data, n, c.stamp)
		}
		c.stamp = n
		c.lats = append(c.lats, now.Sub(time.Unix(0, n)))
		c.nDeltas++
	case bytes.Equal(c.typ, typeStep):
		c.nSteps++
	case bytes.Equal(c.typ, typeFinished):
		run := c.run.Load()
		if run != nil && !bytes.Contains(data, *run) {
			return false, nil
		}
		if !bytes.Contains(data, completed) {
			return false, fmt.Errorf("%s did not complete: %s", c.name(), data)
		}
		if c.turns > 0 && (c.nDeltas != c.turns*c.deltas || c.nSteps != 2*c.turns) {
			return false, fmt.Errorf("%s: %d deltas and %d steps delivered, want %d and %d", c.name(), c.nDeltas, c.nSteps, c.turns*c.deltas, 2*c.turns)
		}
		if run == nil {
			c.unconfirmed = bytes.Clone(data)
		}
		return true, nil
	}
	return false, nil
}

// confirm checks, once the run's id is known, that a run_finished event
// read before it was the run's.
func (c *streamCheck) confirm() error {
	run := c.run.Load()
	if c.unconfirmed == nil {
		return nil
	}
	if run == nil || !bytes.Contains(c.unconfirmed, *run) {
		return fmt.Errorf("stream of %s: finished with another run: %s", c.name(), c.unconfirmed)
	}
	return nil
}

// parsePosition parses an SSE event id, SEQ:IDX.
func parsePosition(b []byte) (stepwise.Position, bool) {
	i := bytes.IndexByte(b, ':')
	if i < 0 {
		return stepwise.Position{}, false
	}
	seq, ok1 := parseStamp(b[:i])
	idx, ok2 := parseStamp(b[i+1:])
	return stepwise.Position{Seq: seq, Idx: idx}, ok1 && ok2
}

func loadPost(ctx context.Context, hc *http.Client, url, body string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// gcPeaks are the peaks of what the collections after the cycle count
// after found: the heap marked live and the goroutine stacks scanned.
type gcPeaks struct {
	after        atomic.Uint64
	live, stacks atomic.Int64
}

// sampleMemory records peaks of heap objects' bytes, goroutines and what
// the last collection found (gc) every 20ms (runtime/metrics does not stop
// the world) until the returned func is called.
func sampleMemory(heap, goroutines *atomic.Int64, gc *gcPeaks) func() {
	var once sync.Once
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/sched/goroutines:goroutines"},
		{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(samples)
			if v := int64(samples[0].Value.Uint64()); v > heap.Load() {
				heap.Store(v)
			}
			if v := int64(samples[1].Value.Uint64()); v > goroutines.Load() {
				goroutines.Store(v)
			}
			if samples[2].Value.Uint64() > gc.after.Load() {
				if v := int64(samples[3].Value.Uint64()); v > gc.live.Load() {
					gc.live.Store(v)
				}
				if v := int64(samples[4].Value.Uint64()); v > gc.stacks.Load() {
					gc.stacks.Store(v)
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { once.Do(func() { close(done); <-stopped }) }
}

// gcCounters are the collector's cumulative counters of the process.
type gcCounters struct {
	cycles       uint64
	mark, assist float64 // CPU seconds
}

var gcSamples = [...]string{"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/mark/dedicated:cpu-seconds", "/cpu/classes/gc/mark/idle:cpu-seconds"}

func readGC() gcCounters {
	var s [len(gcSamples)]metrics.Sample
	for i, name := range gcSamples {
		s[i].Name = name
	}
	metrics.Read(s[:])
	// The fractional workers' time is in dedicated's (runtime/metrics).
	return gcCounters{cycles: s[0].Value.Uint64(), assist: s[1].Value.Float64(),
		mark: s[1].Value.Float64() + s[2].Value.Float64() + s[3].Value.Float64()}
}

// since is the collector's work between c0 and c.
func (c gcCounters) since(c0 gcCounters) GCStats {
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	return GCStats{Cycles: int(c.cycles - c0.cycles), MarkCPU: sec(c.mark - c0.mark), AssistCPU: sec(c.assist - c0.assist)}
}

// parseStamp parses the decimal nanoseconds of a delta stamp.
func parseStamp(b []byte) (int64, bool) {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, len(b) > 0
}
