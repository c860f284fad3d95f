package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// LoadConfig configures RunLoad. Zero values take the defaults.
type LoadConfig struct {
	// Runs is the number of concurrent runs, each in its own session with
	// its own SSE subscriber. Default 100.
	Runs int
	// Turns is the model calls per run; all but the last ask for a tool,
	// so a run commits 2*Turns steps. Default 4.
	Turns int
	// Deltas is the streamed deltas per model call. Default 8.
	Deltas int
	// Latency is the model's delay before each delta. Default 2ms.
	Latency time.Duration
	// Store backs the engine. Default: a new in-memory store.
	Store store.Store
	// Logger receives server and engine errors. Default: discarded.
	Logger *slog.Logger
}

// LoadResult is what RunLoad measured.
type LoadResult struct {
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
	// PeakGoroutines is the peak goroutine count (server, engine and
	// clients together, in one process).
	PeakGoroutines int `json:"peak_goroutines"`
}

func (r *LoadResult) String() string {
	return fmt.Sprintf("%d runs, %d steps, %d deltas in %s: %.0f steps/s, %.0f deltas/s; delivery p50 %s p99 %s max %s; peak heap %.1f MB, %d goroutines",
		r.Runs, r.Steps, r.Deltas, r.Elapsed.Round(time.Millisecond), r.StepsPerS, r.DeltasPerS,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), r.PeakHeapMB, r.PeakGoroutines)
}

func (c LoadConfig) withDefaults() LoadConfig {
	if c.Runs <= 0 {
		c.Runs = 100
	}
	if c.Turns <= 0 {
		c.Turns = 4
	}
	if c.Deltas <= 0 {
		c.Deltas = 8
	}
	if c.Latency == 0 {
		c.Latency = 2 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// RunLoad measures streaming over HTTP on loopback: it starts an engine and
// a server on 127.0.0.1, then Runs concurrent runs of a model that stamps
// each delta with the time it was produced, each watched by an SSE
// subscriber on its session, and reports steps/s, delivery latency and
// memory. It backs BenchmarkHTTPStreaming and `stepwise bench --http`.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	cfg = cfg.withDefaults()
	st := cfg.Store
	if st == nil {
		st = memory.New()
		defer st.Close()
	}
	noop := tool.Func(loadToolDef, func(context.Context, *tool.Call) (*tool.Result, error) { return &tool.Result{Content: "ok"}, nil })
	eng, err := stepwise.New(stepwise.Config{Store: st, Workers: cfg.Runs, Logger: cfg.Logger,
		Agents: []*stepwise.Agent{{Name: "load", Model: &loadModel{turns: cfg.Turns, deltas: cfg.Deltas, latency: cfg.Latency}, Tools: []tool.Tool{noop}}}})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	srv, err := New(Config{Engine: eng, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("load: listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * cfg.Runs, DisableCompression: true}}
	defer hc.CloseIdleConnections()

	var peakHeap, peakG atomic.Int64
	stopSampling := sampleMemory(&peakHeap, &peakG)
	lats := make([][]time.Duration, cfg.Runs)
	var steps, deltas atomic.Int64
	errs := make(chan error, cfg.Runs)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := loadOne(ctx, hc, base, &steps, &deltas)
			lats[i] = l
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopSampling()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	res := &LoadResult{Runs: cfg.Runs, Steps: steps.Load(), Deltas: deltas.Load(), Elapsed: elapsed,
		PeakHeapMB: float64(peakHeap.Load()) / (1 << 20), PeakGoroutines: int(peakG.Load())}
	res.StepsPerS = float64(res.Steps) / elapsed.Seconds()
	res.DeltasPerS = float64(res.Deltas) / elapsed.Seconds()
	if n := len(all); n > 0 {
		res.P50, res.P99, res.Max = all[n/2], all[min(n-1, n*99/100)], all[n-1]
	}
	return res, nil
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// loadOne creates a session, subscribes to it, starts a run and reads the
// stream until the run finishes, returning the delivery latencies.
func loadOne(ctx context.Context, hc *http.Client, base string, steps, deltas *atomic.Int64) ([]time.Duration, error) {
	var sess stepwise.Session
	if err := loadPost(ctx, hc, base+"/v1/sessions", `{"agent":"load"}`, &sess); err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+sess.ID+"/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("subscribe: status %d", resp.StatusCode)
	}
	var created runCreated
	if err := loadPost(ctx, hc, base+"/v1/runs", `{"agent":"load","input":"go","session_id":"`+sess.ID+`"}`, &created); err != nil {
		return nil, err
	}
	var lats []time.Duration
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var ev struct {
		Type  string          `json:"type"`
		RunID string          `json:"run_id"`
		Delta *stepwise.Delta `json:"delta"`
		Run   *stepwise.Run   `json:"run"`
	}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return lats, fmt.Errorf("stream of run %s: %w", created.Run.ID, err)
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		ev.Delta, ev.Run = nil, nil
		if err := json.Unmarshal(data, &ev); err != nil {
			return lats, err
		}
		switch ev.Type {
		case string(stepwise.EventStepDelta):
			now := time.Now()
			if ev.Delta != nil {
				if ts, ok := strings.CutPrefix(ev.Delta.Content, "t"); ok {
					if n, err := strconv.ParseInt(strings.TrimSuffix(ts, "|"), 10, 64); err == nil {
						lats = append(lats, now.Sub(time.Unix(0, n)))
					}
				}
			}
			deltas.Add(1)
		case string(stepwise.EventStepCompleted):
			steps.Add(1)
		case string(stepwise.EventRunFinished):
			if ev.RunID == created.Run.ID {
				if ev.Run == nil || ev.Run.Status != "completed" {
					return lats, fmt.Errorf("run %s did not complete", created.Run.ID)
				}
				return lats, nil
			}
		}
	}
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

// sampleMemory records peaks of live heap bytes and goroutines every 20ms
// (runtime/metrics does not stop the world) until the returned func is
// called.
func sampleMemory(heap, goroutines *atomic.Int64) func() {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/sched/goroutines:goroutines"}}
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
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-stopped }
}
