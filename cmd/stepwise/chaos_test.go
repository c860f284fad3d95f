package main_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store/postgres"
)

// chaosEnv reads an integer knob of the chaos test.
func chaosEnv(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// chaosTimeout bounds the whole chaos test: STEPWISE_CHAOS_TIMEOUT_S, else 6 minutes.
func chaosTimeout(t *testing.T) time.Duration {
	return time.Duration(chaosEnv(t, "STEPWISE_CHAOS_TIMEOUT_S", 360)) * time.Second
}

// TestChaosMultiInstance runs three `stepwise serve` processes on one
// PostgreSQL schema and starts runs through all of them (parallel tool
// calls, a sub-agent, an approval answered through another server than the
// executing one, run streams on random servers) while a driver SIGKILLs and
// restarts a random server every few hundred milliseconds. Then it checks
// the promises of docs/guarantees.md and prints the figures.
//
// Knobs: STEPWISE_CHAOS_SEED (replay a schedule), STEPWISE_CHAOS_KILLS
// (default 60), STEPWISE_CHAOS_RUNS (default 200, half of them second runs
// of a session), STEPWISE_CHAOS_KILL_MS (mean kill interval, default 300).
func TestChaosMultiInstance(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("STEPWISE_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STEPWISE_CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	kills := chaosEnv(t, "STEPWISE_CHAOS_KILLS", 60)
	runs := max(2, chaosEnv(t, "STEPWISE_CHAOS_RUNS", 200)) / 2 * 2
	meanKill := time.Duration(max(20, chaosEnv(t, "STEPWISE_CHAOS_KILL_MS", 300))) * time.Millisecond
	t.Logf("chaos seed %d (replay with STEPWISE_CHAOS_SEED=%d): %d runs, %d kills, a kill every %v on average", seed, seed, runs, kills, meanKill)

	dsn := postgresSchemaDSN(t)
	// Create the schema before the servers race to (they would serialise on
	// the migration lock anyway).
	if st, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	} else {
		st.Close()
	}
	rec, mcpURL := newRecorder(t)
	f := newFleet(t, 3, dsn, mcpURL, 3*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout(t))
	defer cancel()
	for _, s := range f.servers {
		f.start(s)
	}
	if err := f.awaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	sched := rand.New(rand.NewPCG(seed, 1))
	p := &picker{rng: rand.New(rand.NewPCG(seed, 2)), f: f}
	start := time.Now()

	// The invariant monitor: never two unfinished top-level runs in a session.
	var samples, busy atomic.Int64
	monDone := make(chan struct{})
	monCtx, monStop := context.WithCancel(ctx)
	go func() {
		defer close(monDone)
		conn, err := pgx.Connect(monCtx, dsn)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for monCtx.Err() == nil {
			var n int64
			if err := conn.QueryRow(monCtx, `SELECT count(*) FROM (SELECT session_id FROM runs WHERE parent_run_id = '' AND status IN ('queued','running','waiting') GROUP BY session_id HAVING count(*) > 1) d`).Scan(&n); err == nil {
				samples.Add(1)
				busy.Add(n)
			}
			select {
			case <-monCtx.Done():
			case <-time.After(50 * time.Millisecond): // sampling period of a monitor, not synchronisation
			}
		}
	}()

	// The workload: runs/2 sessions, each with two runs one after the
	// other, paced over the kill schedule: session i starts after its share
	// of the kills (and at least the mean pace after the previous one), and
	// the last session's second run only after the last kill, so every kill
	// lands while runs are in flight however fast the runs go.
	sessions := runs / 2
	pace := time.Duration(int64(meanKill) * int64(kills) / int64(max(sessions, 1)))
	kc := newKillCounter()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started []*startedRun
	var startErrs []string
	workloadDone := make(chan struct{})
	go func() {
		defer close(workloadDone)
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sid, err := createSession(ctx, p)
				if err != nil {
					mu.Lock()
					startErrs = append(startErrs, err.Error())
					mu.Unlock()
					return
				}
				for j := range 2 {
					if i == sessions-1 && j == 1 && !kc.await(ctx, kills) {
						return
					}
					r, err := startRun(ctx, p, sid, "chaos "+strconv.Itoa(i)+"/"+strconv.Itoa(j))
					if err != nil {
						mu.Lock()
						startErrs = append(startErrs, err.Error())
						mu.Unlock()
						return
					}
					r.stream = &streamResult{Steps: map[string]int{}}
					mu.Lock()
					started = append(started, r)
					mu.Unlock()
					follow(ctx, p, r.id, r.stream)
				}
			}()
			select {
			case <-time.After(pace): // pacing of the workload, not synchronisation
			case <-ctx.Done():
			}
			if !kc.await(ctx, (i+1)*kills/sessions) {
				return
			}
		}
		wg.Wait()
	}()

	// The kill driver.
	done := 0
	inFlight := 0
	for done < kills {
		d := time.Duration(sched.Int64N(int64(meanKill))) + meanKill/2
		victim := f.servers[sched.IntN(len(f.servers))]
		select {
		case <-time.After(d): // the random kill schedule
		case <-ctx.Done():
			t.Fatalf("timeout after %d kills", done)
		}
		victim.mu.Lock()
		ready := victim.ready
		victim.mu.Unlock()
		select { // kill a started incarnation, not one still opening the database
		case <-ready:
		case <-ctx.Done():
			t.Fatalf("server %d not ready after %d kills: %v\n%s", victim.idx, done, ctx.Err(), f.stderrTail())
		}
		select {
		case <-workloadDone:
		default:
			inFlight++
		}
		f.kill(victim)
		done++
		kc.add()
		f.start(victim)
	}
	chaosEnd := time.Since(start)
	t.Logf("%d kills in %v; waiting for the runs to finish", done, chaosEnd.Round(time.Millisecond))
	select {
	case <-workloadDone:
	case <-ctx.Done():
		mu.Lock()
		for _, r := range started {
			if !r.stream.Finished {
				t.Logf("run %s never finished on its stream:\n%s", r.id, r.stream.trace())
			}
		}
		mu.Unlock()
		t.Fatalf("runs did not finish: %v\n%s", ctx.Err(), f.stderrTail())
	}
	total := time.Since(start)
	monStop()
	<-monDone
	if err := f.awaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	f.stopAll()

	if len(startErrs) > 0 {
		t.Errorf("%d runs could not be started: %v", len(startErrs), startErrs[:min(5, len(startErrs))])
	}
	fig := checkChaos(t, ctx, dsn, f, rec, started)
	fig.seed, fig.kills, fig.inFlight, fig.chaos, fig.total = seed, done, inFlight, chaosEnd, total
	fig.samples, fig.busy = samples.Load(), busy.Load()
	if fig.busy > 0 {
		t.Errorf("%d samples saw a session with two unfinished runs", fig.busy)
	}
	if inFlight < kills {
		t.Errorf("only %d of %d kills happened while runs were in flight", inFlight, kills)
	}
	out, _ := json.MarshalIndent(fig.report(), "", "  ")
	t.Logf("chaos figures:\n%s", out)
}

// killCounter lets the workload wait for the kill driver: add counts a kill
// and wakes every waiter.
type killCounter struct {
	mu   sync.Mutex
	n    int
	tick chan struct{}
}

func newKillCounter() *killCounter { return &killCounter{tick: make(chan struct{})} }

func (k *killCounter) add() {
	k.mu.Lock()
	k.n++
	close(k.tick)
	k.tick = make(chan struct{})
	k.mu.Unlock()
}

// await reports whether n kills happened before ctx ended.
func (k *killCounter) await(ctx context.Context, n int) bool {
	for {
		k.mu.Lock()
		got, tick := k.n, k.tick
		k.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-tick:
		case <-ctx.Done():
			return false
		}
	}
}
