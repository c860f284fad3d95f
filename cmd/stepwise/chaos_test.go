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

	"github.com/stepwise-run/stepwise/internal/pgtest"
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
	cfg := chaosConfig{seed: chaosSeed(t), kills: chaosEnv(t, "STEPWISE_CHAOS_KILLS", 60), runs: chaosEnv(t, "STEPWISE_CHAOS_RUNS", 200),
		meanKill: time.Duration(chaosEnv(t, "STEPWISE_CHAOS_KILL_MS", 300)) * time.Millisecond}
	cfg.dsn = postgresSchemaDSN(t)
	runChaos(t, cfg)
}

// TestChaosDatabaseMisbehaves is TestChaosMultiInstance on a PostgreSQL
// cluster of the test's own, which the driver also restarts (an immediate
// stop: every connection cut, the servers' LISTEN included, then a start
// after a random while) and pauses (SIGSTOP of every PostgreSQL process for
// a random 0.5–3 s, beyond the 2 s after which an instance stops executing
// runs whose leases it cannot renew) while runs are in flight: nothing is
// lost or duplicated, a side effect runs again only when its server was
// killed or the database was out around it (at least once), and every run
// and stream ends. A short setting for CI; longer locally with
// STEPWISE_CHAOS_DB_RESTARTS, STEPWISE_CHAOS_DB_PAUSES (default 2 each),
// STEPWISE_CHAOS_DB_KILLS (default 20) and STEPWISE_CHAOS_DB_RUNS (default
// 60); STEPWISE_CHAOS_SEED replays a schedule.
func TestChaosDatabaseMisbehaves(t *testing.T) {
	cl := pgtest.NewCluster(t)
	cfg := chaosConfig{seed: chaosSeed(t), kills: chaosEnv(t, "STEPWISE_CHAOS_DB_KILLS", 20), runs: chaosEnv(t, "STEPWISE_CHAOS_DB_RUNS", 60),
		meanKill: time.Duration(chaosEnv(t, "STEPWISE_CHAOS_KILL_MS", 300)) * time.Millisecond, dsn: cl.DSN(), db: cl,
		restarts: chaosEnv(t, "STEPWISE_CHAOS_DB_RESTARTS", 2), pauses: chaosEnv(t, "STEPWISE_CHAOS_DB_PAUSES", 2)}
	runChaos(t, cfg)
}

// chaosSeed is the seed of a chaos schedule: STEPWISE_CHAOS_SEED replays one.
func chaosSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("STEPWISE_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STEPWISE_CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	return seed
}

// chaosConfig is one chaos run.
type chaosConfig struct {
	seed     uint64
	kills    int
	runs     int
	meanKill time.Duration
	dsn      string
	// db, when set, is the cluster of dsn, which the driver restarts and
	// pauses as many times as restarts and pauses say, spread over the
	// kills.
	db               *pgtest.Cluster
	restarts, pauses int
}

// runChaos runs the chaos of cfg and checks every promise.
func runChaos(t *testing.T, cfg chaosConfig) {
	seed, kills := cfg.seed, cfg.kills
	runs := max(2, cfg.runs) / 2 * 2
	meanKill := max(20*time.Millisecond, cfg.meanKill)
	t.Logf("chaos seed %d (replay with STEPWISE_CHAOS_SEED=%d): %d runs, %d kills, a kill every %v on average, %d database restarts, %d pauses",
		seed, seed, runs, kills, meanKill, cfg.restarts, cfg.pauses)
	dsn := cfg.dsn
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
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for monCtx.Err() == nil {
			if conn == nil || conn.IsClosed() {
				// (Re)connect: the database may have been restarted.
				cctx, cancel := context.WithTimeout(monCtx, time.Second)
				conn, _ = pgx.Connect(cctx, dsn)
				cancel()
			}
			if conn != nil {
				var n int64
				qctx, cancel := context.WithTimeout(monCtx, time.Second) // a paused database answers nothing
				if err := conn.QueryRow(qctx, `SELECT count(*) FROM (SELECT session_id FROM runs WHERE parent_run_id = '' AND status IN ('queued','running','waiting') GROUP BY session_id HAVING count(*) > 1) d`).Scan(&n); err == nil {
					samples.Add(1)
					busy.Add(n)
				} else {
					conn.Close(context.Background())
					conn = nil
				}
				cancel()
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

	// The kill driver, which also restarts and pauses the database: its
	// events come before evenly spread kills, in a seeded order.
	dbEvents := make([]string, 0, cfg.restarts+cfg.pauses)
	for range cfg.restarts {
		dbEvents = append(dbEvents, "restart")
	}
	for range cfg.pauses {
		dbEvents = append(dbEvents, "pause")
	}
	sched.Shuffle(len(dbEvents), func(i, j int) { dbEvents[i], dbEvents[j] = dbEvents[j], dbEvents[i] })
	nEvents := len(dbEvents)
	var dbRestarts, dbPauses int
	var dbPaused time.Duration
	var outages []outage
	done := 0
	inFlight := 0
	for done < kills {
		if j := nEvents - len(dbEvents); cfg.db != nil && j < nEvents && done >= (j+1)*kills/(nEvents+1) {
			ev := dbEvents[0]
			dbEvents = dbEvents[1:]
			d := time.Duration(500+sched.IntN(2500)) * time.Millisecond
			switch ev {
			case "restart":
				from := time.Now()
				if err := cfg.db.Stop(); err != nil {
					t.Fatal(err)
				}
				d /= 3
				time.Sleep(d) // the database is down this long
				if err := cfg.db.Start(); err != nil {
					t.Fatal(err)
				}
				outages = append(outages, outage{from, time.Now()})
				dbRestarts++
			case "pause":
				from := time.Now()
				if err := cfg.db.Pause(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(d) // the database stalls this long
				cfg.db.Resume()
				outages = append(outages, outage{from, time.Now()})
				dbPauses++
				dbPaused += d
			}
			t.Logf("database %s (%v) after %d kills", ev, d.Round(time.Millisecond), done)
		}
		d := time.Duration(sched.Int64N(int64(meanKill))) + meanKill/2
		victim := f.servers[sched.IntN(len(f.servers))]
		select {
		case <-time.After(d): // the random kill schedule
		case <-ctx.Done():
			t.Fatalf("timeout after %d kills", done)
		}
		for up := false; !up; {
			victim.mu.Lock()
			ready, exited := victim.ready, victim.done
			victim.mu.Unlock()
			select { // kill a started incarnation, not one still opening the database
			case <-ready:
				up = true
			case <-exited:
				// It could not open the database (restarting, or paused
				// past its timeout) and exited, as a supervisor would
				// see: start it again.
				t.Logf("server %d exited before it was ready; starting it again", victim.idx)
				f.start(victim)
			case <-ctx.Done():
				t.Fatalf("server %d not ready after %d kills: %v\n%s", victim.idx, done, ctx.Err(), f.stderrTail())
			}
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
	fig := checkChaos(t, ctx, dsn, f, rec, started, outages)
	fig.seed, fig.kills, fig.inFlight, fig.chaos, fig.total = seed, done, inFlight, chaosEnd, total
	fig.samples, fig.busy = samples.Load(), busy.Load()
	fig.dbRestarts, fig.dbPauses, fig.dbPaused = dbRestarts, dbPauses, dbPaused
	if dbRestarts != cfg.restarts || dbPauses != cfg.pauses {
		t.Errorf("%d database restarts and %d pauses of %d and %d", dbRestarts, dbPauses, cfg.restarts, cfg.pauses)
	}
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
