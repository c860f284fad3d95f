package faultstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/faultstore"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

// seeds returns the seeds to run: STEPWISE_FAULT_SEED replays one,
// STEPWISE_FAULT_SEEDS sets how many (default 12, 4 with -short; set it
// high locally: STEPWISE_FAULT_SEEDS=500).
func seeds(t *testing.T) []int64 {
	if v := os.Getenv("STEPWISE_FAULT_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("STEPWISE_FAULT_SEED=%q: %v", v, err)
		}
		return []int64{s}
	}
	n := 12
	if testing.Short() {
		n = 4
	}
	if v := os.Getenv("STEPWISE_FAULT_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("STEPWISE_FAULT_SEEDS=%q: want a positive integer", v)
		}
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// schedule is the fault schedule of a seed: every fault at once, at rates
// that let runs make progress.
func schedule(seed int64) faultstore.Config {
	return faultstore.Config{Seed: seed, Error: 0.04, Ambiguous: 0.03, Full: 0.01, Latency: 0.1, MaxLatency: 2 * time.Millisecond,
		RenewFail: 0.2, NotifyLost: 0.2, NotifyDelay: 0.2, MaxNotifyDelay: 5 * time.Millisecond}
}

// The engine under seeded fault schedules keeps its invariants: sequences
// gap-free, each step committed once, at most one unfinished run per
// session, each tool call's result committed at most once, no execution of
// a tool call after its result committed; and once the faults stop, every
// run finishes. A failure names its seed: replay it with
// STEPWISE_FAULT_SEED=N.
func TestEngineUnderFaults(t *testing.T) {
	t.Parallel()
	for _, seed := range seeds(t) {
		for _, driver := range []string{"memory", "sqlite", "postgres"} {
			if driver != "memory" && seed%3 != map[string]int64{"sqlite": 1, "postgres": 2}[driver] {
				continue // SQLite and PostgreSQL on every third seed each: they are slower
			}
			t.Run(fmt.Sprintf("%s/seed=%d", driver, seed), func(t *testing.T) {
				t.Parallel()
				var inner store.Store
				switch driver {
				case "memory":
					inner = memory.New()
				case "sqlite":
					st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "faults.db")})
					if err != nil {
						t.Fatal(err)
					}
					inner = st
				case "postgres":
					inner = openPostgres(t)
				}
				t.Cleanup(func() { _ = inner.Close() })
				instances := 1
				if driver == "postgres" {
					instances = 2 // a shared database: two engines, notifications between them
				}
				runUnderFaults(t, seed, inner, instances)
			})
		}
	}
}

// openPostgres opens a store on a fresh schema of STEPWISE_TEST_POSTGRES,
// dropped when the test ends.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	dsn := pgtest.DSN(t)
	schema := fmt.Sprintf("stepwise_faults_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	st, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tracker records the executions of tool calls and whether one ran after
// its result was committed.
type tracker struct {
	inner store.Store
	mu    sync.Mutex
	runs  map[string]int // idempotency key → executions
	late  []string
}

func (k *tracker) tool() tool.Tool {
	def := llm.ToolDef{Name: "record", Parameters: json.RawMessage(`{"type":"object"}`)}
	return tool.Func(def, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		steps, err := k.inner.StepList(context.Background(), &store.StepListParams{RunID: c.RunID})
		k.mu.Lock()
		defer k.mu.Unlock()
		k.runs[c.IdempotencyKey]++
		if err == nil {
			for _, s := range steps {
				if s.Kind == steptype.KindTool && s.ToolCallID == c.ID && s.Status == steptype.StepCompleted {
					k.late = append(k.late, fmt.Sprintf("call %s of run %s executed after its result committed as step %d", c.ID, c.RunID, s.Sequence))
				}
			}
		}
		return &tool.Result{Content: "recorded " + c.IdempotencyKey}, nil
	})
}

func runUnderFaults(t *testing.T, seed int64, inner store.Store, instances int) {
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (replay: STEPWISE_FAULT_SEED=%d): %s", seed, seed, fmt.Sprintf(format, args...))
	}
	ctx := t.Context()
	k := &tracker{inner: inner, runs: map[string]int{}}
	model := scripted.New("faults", scripted.Script{Strict: true, Turns: []scripted.Turn{
		{Text: "calling", ToolCalls: []steptype.ToolCall{{Name: "record", Arguments: json.RawMessage(`{"a":1}`)}, {Name: "record", Arguments: json.RawMessage(`{"b":2}`)}}, Repeat: 3},
		{Text: "done"},
	}})
	agent := &stepwise.Agent{Name: "worker", Model: model, Tools: []tool.Tool{k.tool()}}
	// Each instance has a schedule of its own (seed, seed+1000, …).
	var stores []*faultstore.Store
	var engines []*stepwise.Engine
	for i := range instances {
		fs := faultstore.New(inner, schedule(seed+int64(1000*i)))
		stores = append(stores, fs)
		e, err := stepwise.New(stepwise.Config{Store: fs, Agents: []*stepwise.Agent{agent}, Lease: 300 * time.Millisecond, Owner: fmt.Sprintf("instance-%d", i),
			PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			fail("new engine: %v", err)
		}
		defer e.Close()
		if err := e.Start(ctx); err != nil {
			fail("start: %v", err)
		}
		engines = append(engines, e)
	}
	eng, fs := engines[0], stores[0]
	const sessions = 6
	var streams []*runStream
	for i := range sessions {
		for attempt := 0; ; attempt++ {
			if r, err := eng.StartRun(ctx, stepwise.StartParams{Agent: "worker", Input: fmt.Sprintf("task %d", i)}); err == nil {
				// Watched from the last instance: on PostgreSQL, another
				// one than the run's starter.
				streams = append(streams, watchRun(ctx, engines[len(engines)-1], r.ID))
				break
			}
			if attempt == 50 {
				fail("50 failed starts in a row")
			}
		}
	}
	// Faults for a while, checking the one-unfinished-run invariant.
	end := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(end) {
		checkOneUnfinished(t, inner, fail)
		time.Sleep(20 * time.Millisecond)
	}
	for _, st := range stores {
		st.SetEnabled(false)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, err := inner.RunList(ctx, &store.RunListParams{})
		if err != nil {
			fail("list runs: %v", err)
		}
		open := 0
		for _, r := range runs {
			if !r.Status.Terminal() {
				open++
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			fail("%d of %d runs unfinished 30s after the faults stopped (injected %v)", open, len(runs), fs.Injected())
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkInvariants(t, inner, k, fail)
	for _, rs := range streams {
		rs.check(t, inner, deadline, fail)
	}
	runs, _ := inner.RunList(ctx, &store.RunListParams{})
	statuses := map[steptype.RunStatus]int{}
	for _, r := range runs {
		statuses[r.Status]++
		if r.Status == steptype.RunFailed && os.Getenv("STEPWISE_FAULT_VERBOSE") != "" {
			t.Logf("run %s failed: %+v", r.ID, r.Error)
		}
	}
	k.mu.Lock()
	execs := 0
	for _, n := range k.runs {
		execs += n
	}
	keys := len(k.runs)
	k.mu.Unlock()
	t.Logf("seed %d: %d calls, injected %v; runs %v; %d tool executions of %d calls", seed, fs.Calls(), fs.Injected(), statuses, execs, keys)
}

// runStream is a consumer of a run's event stream that reconnects from
// its last position after an error, as an SSE client does.
type runStream struct {
	runID string
	mu    sync.Mutex
	steps []string // ids of the step_completed events, in order
	done  bool     // run_finished seen
	errs  int
}

func watchRun(ctx context.Context, eng *stepwise.Engine, runID string) *runStream {
	rs := &runStream{runID: runID}
	go func() {
		var after stepwise.Position
		for ctx.Err() == nil {
			for ev, err := range eng.Subscribe(ctx, stepwise.SubscribeParams{RunID: runID, After: after}) {
				if err != nil {
					rs.mu.Lock()
					rs.errs++
					rs.mu.Unlock()
					break
				}
				after = ev.Position
				rs.mu.Lock()
				switch ev.Type {
				case stepwise.EventStepCompleted:
					rs.steps = append(rs.steps, ev.Step.ID)
				case stepwise.EventRunFinished:
					rs.done = true
				}
				done := rs.done
				rs.mu.Unlock()
				if done {
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return rs
}

// check waits for the stream to end, then compares what it received with
// the run's committed steps: each exactly once, in order.
func (rs *runStream) check(t *testing.T, st store.Store, deadline time.Time, fail func(string, ...any)) {
	t.Helper()
	for {
		rs.mu.Lock()
		done := rs.done
		rs.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			fail("the stream of run %s did not end", rs.runID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	steps, err := st.StepList(t.Context(), &store.StepListParams{RunID: rs.runID})
	if err != nil {
		fail("steps of run %s: %v", rs.runID, err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var want []string
	for _, s := range steps {
		want = append(want, s.ID)
	}
	if fmt.Sprint(want) != fmt.Sprint(rs.steps) {
		got := map[string]bool{}
		for _, id := range rs.steps {
			got[id] = true
		}
		for _, s := range steps {
			if !got[s.ID] {
				t.Logf("run %s: step %d (%s %s %s, session %s) not delivered", rs.runID, s.Sequence, s.Kind, s.Name, s.Status, s.SessionID)
			}
		}
		fail("run %s: the stream delivered %d steps %v (after %d reconnections), committed %d %v", rs.runID, len(rs.steps), rs.steps, rs.errs, len(want), want)
	}
}

func checkOneUnfinished(t *testing.T, st store.Store, fail func(string, ...any)) {
	t.Helper()
	runs, err := st.RunList(t.Context(), &store.RunListParams{})
	if err != nil {
		fail("list runs: %v", err)
	}
	open := map[string]int{}
	for _, r := range runs {
		if !r.Status.Terminal() && r.ParentRunID == "" {
			if open[r.SessionID]++; open[r.SessionID] > 1 {
				fail("session %s has %d unfinished runs", r.SessionID, open[r.SessionID])
			}
		}
	}
}

func checkInvariants(t *testing.T, st store.Store, k *tracker, fail func(string, ...any)) {
	t.Helper()
	ctx := t.Context()
	page, err := st.SessionList(ctx, &store.SessionListParams{Limit: 1000})
	if err != nil {
		fail("list sessions: %v", err)
	}
	ids := map[string]bool{}
	for _, sess := range page.Sessions {
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: sess.ID})
		if err != nil {
			fail("steps of %s: %v", sess.ID, err)
		}
		results := map[string]int{}
		for i, s := range steps {
			if s.Sequence != int64(i+1) {
				fail("session %s: step %d has sequence %d: a gap or a duplicate", sess.ID, i+1, s.Sequence)
			}
			if ids[s.ID] {
				fail("step %s committed twice", s.ID)
			}
			ids[s.ID] = true
			if s.Kind == steptype.KindTool && s.Status == steptype.StepCompleted {
				if results[s.ToolCallID]++; results[s.ToolCallID] > 1 {
					fail("session %s: tool call %s has %d committed results", sess.ID, s.ToolCallID, results[s.ToolCallID])
				}
			}
		}
		if int64(len(steps)) != sess.LastSequence {
			fail("session %s: %d steps, last sequence %d", sess.ID, len(steps), sess.LastSequence)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.late) > 0 {
		fail("%d executions after a committed result: %v", len(k.late), k.late)
	}
}
