package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/internal/workertest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/wire"
)

// The worker tests run `stepwise serve` and workers written in Go over
// plain HTTP (internal/workertest): in the test process, and, for the crash
// test, as processes of their own (this test binary with
// STEPWISE_TEST_WORKER set, see TestMain).

// shopDefinition is the agent the workers register: a worker step
// "validate" (the start step) routing to the model, which calls the worker
// tool "charge" once (fakeopenai) and then answers "done".
func shopDefinition(modelURL string) *wire.WorkerAgent {
	def := fmt.Sprintf(`{"name":"shop","model":"openai:gpt-4o-mini","model_options":{"base_url":%q,"api_key_env":"SHOP_KEY"},"start_step":"validate"}`, modelURL+"/v1")
	return &wire.WorkerAgent{
		Definition: json.RawMessage(def),
		Steps:      []*wire.WorkerStep{{Name: "validate", Next: []string{"llm"}}},
		Tools: []*wire.WorkerTool{{Name: "charge", Description: "Charge an order (a side effect)",
			Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`),
			Output:     json.RawMessage(`{"type":"object","required":["charged"]}`)}},
	}
}

func shopModel(t *testing.T) *fakeopenai.Server {
	srv := fakeopenai.New(fakeopenai.Config{Iterations: 1, Tool: "charge", Args: `{"order":"A-1"}`, Final: "done"})
	t.Cleanup(srv.Close)
	return srv
}

// shopHandle is the workers' handler: the side effect of charge is a line
// in execLog (when set) before the result is reported.
func shopHandle(execLog string) workertest.Handler {
	return func(ctx context.Context, w *workertest.Worker, t *wire.Task) workertest.Finish {
		switch t.Name {
		case "validate":
			_, _ = w.Events(ctx, t, &wire.TaskEvent{Type: wire.TaskEventProgress, Message: "validating"})
			return workertest.Finish{Complete: &wire.TaskComplete{Next: "llm", Content: "valid", State: json.RawMessage(`{"validated":true}`)}}
		case "charge":
			if execLog != "" {
				f, err := os.OpenFile(execLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					return workertest.Finish{Fail: &wire.TaskFail{Message: err.Error(), Class: wire.ErrorTransient}}
				}
				fmt.Fprintf(f, "%s %d %s\n", t.IdempotencyKey, time.Now().UnixNano(), w.ID)
				f.Close()
				// The side effect's latency, so that kills land during it.
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(20+rand.IntN(130)) * time.Millisecond):
				}
			}
			return workertest.Finish{Complete: &wire.TaskComplete{Content: "charged " + string(t.Input.Arguments), Output: json.RawMessage(`{"charged":true}`)}}
		}
		return workertest.Finish{Fail: &wire.TaskFail{Message: "unknown handler " + t.Name}}
	}
}

// serveWorkers starts `stepwise serve` on db at addr with a short worker
// lease and waits until it answers.
func serveWorkers(t *testing.T, db, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "--db", db, "serve", "--addr", addr, "--worker-lease", "2s")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=", "SHOP_KEY=test")
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/v1/health"); err == nil {
			resp.Body.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func initiate(url, input string) (string, error) {
	resp, err := http.Post(url+"/v1/runs", "application/json", strings.NewReader(fmt.Sprintf(`{"agent":"shop","input":%q}`, input)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var rc wire.RunCreated
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("initiate: %d %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&rc); err != nil {
		return "", err
	}
	return rc.Run.ID, nil
}

func getRun(url, id string) (*steptype.Run, error) {
	resp, err := http.Get(url + "/v1/runs/" + id)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("run %s: %d", id, resp.StatusCode)
	}
	var r steptype.Run
	return &r, json.NewDecoder(resp.Body).Decode(&r)
}

// TestWorkersThroughServe runs an agent whose start step and tool are
// served by a Go worker over HTTP, on `stepwise serve` with SQLite and with
// PostgreSQL, and reads the result back with the CLI.
func TestWorkersThroughServe(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			db := "sqlite:" + filepath.Join(t.TempDir(), "w.db")
			if driver == "postgres" {
				db = postgresSchemaDSN(t)
			}
			model := shopModel(t)
			addr := freeAddr(t)
			srv := serveWorkers(t, db, addr)
			defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
			url := "http://" + addr
			w := &workertest.Worker{URL: url, ID: "go-worker-1"}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			reg, err := w.Register(ctx, shopDefinition(model.URL))
			if err != nil || reg.Limits.LeaseMS != 2000 {
				t.Fatalf("register: %+v, %v", reg, err)
			}
			served := make(chan struct{})
			go func() {
				defer close(served)
				w.Serve(ctx, []string{"shop"}, 2, 500*time.Millisecond, shopHandle(""), func(err error) { t.Logf("worker: %v", err) })
			}()
			out, errOut, code := stepwise(t, t.TempDir(), "--server", url, "run", "--agent", "shop", "--input", "buy A-1")
			if code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "charge") {
				t.Fatalf("remote run: exit %d\n%s\n%s", code, out, errOut)
			}
			m := runLine.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no session in\n%s", out)
			}
			out, _, code = stepwise(t, t.TempDir(), "--server", url, "steps", m[1])
			if code != 0 || strings.Count(out, "[worker go-worker-1]") != 2 {
				t.Errorf("remote steps: exit %d, want the custom and the tool step marked with the worker:\n%s", code, out)
			}
			resp, err := http.Get(url + "/v1/sessions/" + m[1] + "/steps")
			if err != nil {
				t.Fatal(err)
			}
			var sl wire.StepList
			err = json.NewDecoder(resp.Body).Decode(&sl)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, s := range sl.Steps {
				kinds = append(kinds, string(s.Kind))
				if (s.Kind == steptype.KindCustom || s.Kind == steptype.KindTool) && s.Metadata["worker"] != "go-worker-1" {
					t.Errorf("%s step %s: worker %v, want go-worker-1", s.Kind, s.Name, s.Metadata["worker"])
				}
			}
			if strings.Join(kinds, ",") != "user,custom,llm,tool,llm" {
				t.Errorf("steps %v", kinds)
			}
			out, _, code = stepwise(t, t.TempDir(), "--server", url, "trace", m[1])
			if code != 0 || strings.Count(out, "\nWorker: go-worker-1") != 2 {
				t.Errorf("remote trace: exit %d, want the custom and the tool step to name the worker:\n%s", code, out)
			}
			// Per-worker metrics: the custom step's task and the tool's.
			out, _, code = stepwise(t, t.TempDir(), "--server", url, "workers", "--json")
			var wl wire.WorkerList
			if err := json.Unmarshal([]byte(out), &wl); code != 0 || err != nil || len(wl.Workers) != 1 {
				t.Fatalf("workers --json: exit %d, %v:\n%s", code, err, out)
			}
			if ws := wl.Workers[0]; ws.ID != "go-worker-1" || strings.Join(ws.Agents, ",") != "shop" || ws.Claimed != 2 || ws.Completed != 2 ||
				ws.Failed != 0 || ws.Holding != 0 || ws.TaskSamples != 2 || ws.TaskP50MS <= 0 || ws.TaskP95MS < ws.TaskP50MS {
				t.Errorf("worker stats %+v, want go-worker-1 of shop with 2 tasks claimed and completed, timed", ws)
			}
			out, _, code = stepwise(t, t.TempDir(), "--server", url, "workers")
			if code != 0 || !strings.Contains(out, "go-worker-1  shop") || !strings.Contains(out, "TASK P95") {
				t.Errorf("workers: exit %d\n%s", code, out)
			}
			cancel()
			<-served
		})
	}
}

// workerProc is a worker process of the crash test.
type workerProc struct {
	id  string
	cmd *exec.Cmd
}

// runTestWorker is the body of a worker process (STEPWISE_TEST_WORKER):
// it serves the shop agent against STEPWISE_TEST_WORKER_URL until killed,
// registering again whenever the server forgot it (a restart).
func runTestWorker() int {
	w := &workertest.Worker{URL: os.Getenv("STEPWISE_TEST_WORKER_URL"), ID: os.Getenv("STEPWISE_TEST_WORKER")}
	def := shopDefinition(os.Getenv("STEPWISE_TEST_WORKER_MODEL"))
	handle := shopHandle(os.Getenv("STEPWISE_TEST_WORKER_LOG"))
	ctx := context.Background()
	register := func() {
		for {
			if _, err := w.Register(ctx, def); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // the server is restarting
		}
	}
	register()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				ts, err := w.Poll(ctx, []string{"shop"}, 1, 5*time.Second)
				if err != nil {
					if workertest.Code(err) == wire.CodeNotServed {
						register()
					} else {
						time.Sleep(50 * time.Millisecond) // the server is restarting
					}
					continue
				}
				for _, t := range ts {
					serveTask(ctx, w, t, handle, register)
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// serveTask works on one task with heartbeats and reports its result,
// retrying while the server restarts, until the report is taken or refused.
func serveTask(ctx context.Context, w *workertest.Worker, t *wire.Task, handle workertest.Handler, register func()) {
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
				_, _ = w.Heartbeat(hctx, t)
			}
		}
	}()
	f := handle(hctx, w, t)
	for range 200 {
		var err error
		switch {
		case f.Complete != nil:
			_, err = w.Complete(ctx, t, f.Complete)
		case f.Fail != nil:
			_, err = w.Fail(ctx, t, f.Fail)
		}
		switch code := workertest.Code(err); {
		case err == nil, code == wire.CodeLeaseLost, code == wire.CodeTaskFinished, code == wire.CodeTaskNotFound:
			return
		case code == wire.CodeNotServed:
			register()
		default:
			time.Sleep(50 * time.Millisecond) // the server is restarting
		}
	}
}

func crashRuns(t *testing.T) int {
	n := 50 // 2 tasks each: 100 tasks
	if v := os.Getenv("STEPWISE_WORKER_CRASH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("STEPWISE_WORKER_CRASH_RUNS=%q", v)
		}
	}
	return n
}

// TestWorkersCrash runs two worker processes serving one agent whose tool
// has a side effect, over ≥ 100 tasks, while worker processes and the
// server are SIGKILLed at random moments (seed printed; STEPWISE_CRASH_SEED
// replays, STEPWISE_WORKER_CRASH_RUNS makes it longer): every run
// completes, each task's result commits once, no task executes after its
// result committed, and every transcript equals an uninterrupted run's. It
// runs on SQLite and on PostgreSQL, with workers written in Go over plain
// HTTP (internal/workertest) and with workers of the TypeScript SDK
// (sdk/typescript/test/crash-worker.js, under node). On PostgreSQL it
// also runs two `serve` instances on the one database (postgres-2/go):
// each worker polls one of them, runs are started on both, and the
// server killed is either instance, so tasks created by one instance are
// served by the workers of the other.
func TestWorkersCrash(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, lang := range []string{"go", "typescript"} {
			t.Run(driver+"/"+lang, func(t *testing.T) {
				t.Parallel()
				workersCrash(t, driver, lang, 1)
			})
		}
	}
	t.Run("postgres-2/go", func(t *testing.T) {
		t.Parallel()
		workersCrash(t, "postgres", "go", 2)
	})
}

// crashWorkerCmd returns the command of a crash test's worker process in
// lang: this test binary (runTestWorker) or node with the SDK's worker.
func crashWorkerCmd(t *testing.T, lang string) func() *exec.Cmd {
	switch lang {
	case "go":
		return func() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") }
	case "typescript":
		node, err := exec.LookPath("node")
		if err != nil {
			if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
				t.Fatal("STEPWISE_REQUIRE_NPM=1 but node is not installed")
			}
			t.Skip("node is not installed")
		}
		script, err := filepath.Abs(filepath.Join("..", "..", "sdk", "typescript", "test", "crash-worker.js"))
		if err != nil {
			t.Fatal(err)
		}
		return func() *exec.Cmd { return exec.Command(node, script) }
	}
	t.Fatalf("no worker in %s", lang)
	return nil
}

func workersCrash(t *testing.T, driver, lang string, instances int) {
	workerCmd := crashWorkerCmd(t, lang)
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "crash.db")
	db := "sqlite:" + dbPath
	if driver == "postgres" {
		db = postgresSchemaDSN(t)
	}
	execLog := filepath.Join(dir, "exec.log")
	model := shopModel(t)
	addrs, urls := make([]string, instances), make([]string, instances)
	srvs := make([]*exec.Cmd, instances)
	var mu sync.Mutex
	for i := range instances {
		addrs[i] = freeAddr(t)
		urls[i] = "http://" + addrs[i]
		srvs[i] = serveWorkers(t, db, addrs[i])
	}
	url := urls[0]
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, srv := range srvs {
			_ = srv.Process.Kill()
			_ = srv.Wait()
		}
	}()

	// Worker i polls instance i (of instances).
	startWorker := func(id string, i int) *workerProc {
		cmd := workerCmd()
		cmd.Env = append(os.Environ(), "SHOP_KEY=test", "STEPWISE_TEST_WORKER="+id, "STEPWISE_TEST_WORKER_URL="+urls[i%instances],
			"STEPWISE_TEST_WORKER_MODEL="+model.URL, "STEPWISE_TEST_WORKER_LOG="+execLog)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return &workerProc{id: id, cmd: cmd}
	}
	workers := []*workerProc{startWorker("wa-0", 0), startWorker("wb-0", 1)}
	defer func() {
		for _, w := range workers {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	}()

	for _, u := range urls {
		for deadline := time.Now().Add(30 * time.Second); ; {
			resp, err := http.Get(u + "/v1/agents/shop")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break // a worker registered it
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no worker registered the agent on %s", u)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The reference: one run before anything is killed.
	ref, err := initiate(url, "buy")
	if err != nil {
		t.Fatal(err)
	}
	waitRuns(t, url, []string{ref}, 60*time.Second)

	n := crashRuns(t)
	var runs []string
	for len(runs) < n {
		id, err := initiate(urls[len(runs)%instances], "buy")
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, id)
	}
	// The chaos: until every run finished, every 100-600 ms kill a worker
	// (and start a new one under a new id) or the server (and restart it).
	done := make(chan struct{})
	kills := map[string]int{}
	go func() {
		defer close(done)
		waitRuns(t, url, runs, 5*time.Minute)
	}()
	for gen := 1; ; gen++ {
		select {
		case <-done:
			goto finished
		case <-time.After(time.Duration(50+rng.IntN(350)) * time.Millisecond):
		}
		if kills["server"]+kills["worker"] >= 12 {
			continue // enough: let the rest finish
		}
		// The first kill is a worker's, the second the server's, then at random.
		if total := kills["server"] + kills["worker"]; total == 1 || (total > 1 && rng.IntN(3) == 0) {
			kills["server"]++
			i := rng.IntN(instances)
			mu.Lock()
			_ = srvs[i].Process.Signal(syscall.SIGKILL)
			_ = srvs[i].Wait()
			srvs[i] = serveWorkers(t, db, addrs[i])
			mu.Unlock()
		} else {
			kills["worker"]++
			i := rng.IntN(len(workers))
			_ = workers[i].cmd.Process.Signal(syscall.SIGKILL)
			_ = workers[i].cmd.Wait()
			workers[i] = startWorker(fmt.Sprintf("w%c-%d", 'a'+i, gen), i)
		}
	}
finished:
	t.Logf("%d runs, %d tasks; %d serve instance(s); killed a server %d times, a worker %d times", len(runs)+1, 2*(len(runs)+1), instances,
		kills["server"], kills["worker"])
	mu.Lock()
	for _, srv := range srvs {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	}
	mu.Unlock()

	st := openCrashStore(t, db)
	ctx := context.Background()
	refRun, err := st.RunGet(ctx, &store.RunGetParams{ID: ref})
	if err != nil {
		t.Fatal(err)
	}
	want := storeTranscript(t, st, refRun.SessionID)
	var shape []string
	for _, l := range want {
		shape = append(shape, strings.SplitN(l, "|", 2)[0])
	}
	if strings.Join(shape, ",") != "user,custom,llm,tool,llm" {
		t.Fatalf("reference transcript:\n%s", strings.Join(want, "\n"))
	}
	finishedAt := map[string]time.Time{}
	servedBy := map[byte]int{} // 'a', 'b': tasks completed by the workers of instance 0, 1
	for _, id := range append([]string{ref}, runs...) {
		r, err := st.RunGet(ctx, &store.RunGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != steptype.RunCompleted {
			t.Errorf("run %s is %s: %+v", id, r.Status, r.Error)
			continue
		}
		if got := storeTranscript(t, st, r.SessionID); !slices.Equal(got, want) {
			t.Errorf("run %s: transcript differs from the uninterrupted run's:\n%s", id, diff(got, want))
		}
		tasks, err := st.TaskList(ctx, &store.TaskListParams{RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 2 {
			t.Errorf("run %s has %d tasks, want 2", id, len(tasks))
		}
		for _, task := range tasks {
			if task.State != store.TaskCompleted {
				t.Errorf("task %s of run %s is %s", task.ID, id, task.State)
			}
			finishedAt[task.Key] = task.FinishedAt
			if len(task.Owner) > 1 {
				servedBy[task.Owner[1]]++
			}
		}
	}
	if instances > 1 && (servedBy['a'] == 0 || servedBy['b'] == 0) {
		t.Errorf("tasks completed by the workers of each instance: %d and %d; want both to serve (a task is offered on every instance)", servedBy['a'], servedBy['b'])
	}
	// No execution of a task after its result committed.
	b, err := os.ReadFile(execLog)
	if err != nil {
		t.Fatal(err)
	}
	execs := 0
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("exec log line %q", l)
		}
		at, _ := strconv.ParseInt(f[1], 10, 64)
		fin, ok := finishedAt[f[0]]
		if !ok {
			t.Errorf("execution of %s by %s, a task of no run", f[0], f[2])
			continue
		}
		// The database clock has millisecond resolution.
		if time.Unix(0, at).After(fin.Add(time.Millisecond)) {
			t.Errorf("task %s executed by %s at %s, after its result committed at %s", f[0], f[2], time.Unix(0, at).UTC(), fin)
		}
		execs++
	}
	t.Logf("%d executions of %d tool tasks", execs, len(runs)+1)
}

// openCrashStore opens the store of db (sqlite:PATH or a PostgreSQL DSN)
// to check what the crash test's server committed.
func openCrashStore(t *testing.T, db string) store.Store {
	t.Helper()
	var st store.Store
	var err error
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		st, err = sqlite.Open(context.Background(), sqlite.Config{Path: path, ReadOnly: true})
	} else {
		st, err = postgres.Open(context.Background(), postgres.Config{DSN: db})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitRuns waits until every run finished, across server restarts.
func waitRuns(t *testing.T, url string, ids []string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	left := slices.Clone(ids)
	for len(left) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("%d runs did not finish in %s, e.g. %s", len(left), timeout, left[0])
			return
		}
		r, err := getRun(url, left[0])
		if err == nil && r.Status.Terminal() {
			left = left[1:]
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
}
