package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/bench"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// TestAgentViewsIncremental: the agent overview and graph of a server that
// keeps the steps it read between calls answer byte for byte as a server
// that keeps none, after appends, a truncation re-appended to the same last
// sequence, a waiting step resolved, a delete, a session deleted and
// created again under its id, and with forks; and a repeated call reads
// one step row per session plus what is new.
func TestAgentViewsIncremental(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testAgentViewsIncremental(t, memory.New()) })
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "views.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		testAgentViewsIncremental(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := fmt.Sprintf("stepwise_views_%d", time.Now().UnixNano())
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
		t.Cleanup(func() { _ = st.Close() })
		testAgentViewsIncremental(t, st)
	})
}

func testAgentViewsIncremental(t *testing.T, st store.Store) {
	ctx := t.Context()
	counted := &countingStore{Store: st}
	cached := serveStore(t, capableStore{counted}, 0)
	plain := serveStore(t, st, -1)
	const agent = "views"
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func() time.Time { now = now.Add(time.Second); return now }
	n := 0
	step := func(sess string, status steptype.StepStatus) *steptype.Step {
		n++
		kinds := []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindLLM}
		names := []string{"input", "llm", "tools", "llm"}
		k := n % len(kinds)
		s := &steptype.Step{
			ID: stepwise.NewID(), SessionID: sess, Kind: kinds[k], Name: names[k], Status: status,
			Content: fmt.Sprintf("content %d", n%5), ToolName: map[bool]string{true: "lookup"}[kinds[k] == steptype.KindTool],
			Metrics: steptype.Metrics{Duration: time.Duration(n%7+1) * time.Millisecond, InputTokens: int64(n), OutputTokens: 2, Cost: 0.001 * float64(n%3)},
		}
		if k == 0 {
			s.Role = steptype.RoleUser
		}
		return s
	}
	appendSteps := func(sess string, k int, status steptype.StepStatus) []*steptype.Step {
		t.Helper()
		var steps []*steptype.Step
		for range k {
			steps = append(steps, step(sess, status))
		}
		out, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	create := func(id string) {
		t.Helper()
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id, Agent: agent, Now: tick()}); err != nil {
			t.Fatal(err)
		}
	}
	s1, s2, s3 := stepwise.NewID(), stepwise.NewID(), stepwise.NewID()
	create(s1)
	appendSteps(s1, 10, steptype.StepCompleted)
	create(s2)
	appendSteps(s2, 3, steptype.StepCompleted)
	waiting := appendSteps(s2, 1, steptype.StepWaiting)[0]
	appendSteps(s2, 4, steptype.StepCompleted)
	create(s3)
	appendSteps(s3, 5, steptype.StepCompleted)
	fork := stepwise.NewID()
	if _, err := st.SessionFork(ctx, &store.SessionForkParams{ID: fork, ParentID: s1, Sequence: 6, Now: tick()}); err != nil {
		t.Fatal(err)
	}
	appendSteps(fork, 3, steptype.StepCompleted)

	paths := []string{"/overview", "/graph", "/overview?sessions=2", "/graph?max_nodes=3&repeat=2"}
	// same compares every answer of both servers; reads returns the step
	// rows the cached server's first answer read.
	same := func(when string) (reads int64) {
		t.Helper()
		for i, p := range paths {
			counted.reset()
			got := getBody(t, cached+"/v1/agents/"+agent+p)
			if i == 0 {
				reads = counted.stepRows.Load()
			}
			if want := getBody(t, plain+"/v1/agents/"+agent+p); string(got) != string(want) {
				t.Errorf("%s: GET %s differs from the answer read afresh:\n got %.800s\nwant %.800s", when, p, got, want)
			}
		}
		return reads
	}
	const sessions = 4
	same("cold")
	// Warm: one row per session, and s2's from its waiting step (5 rows).
	if r := same("warm"); r > sessions-1+5 {
		t.Errorf("warm call read %d step rows, want ≤ %d", r, sessions-1+5)
	}
	appendSteps(s1, 3, steptype.StepCompleted)
	appendSteps(fork, 2, steptype.StepCompleted)
	if r := same("after appends"); r > sessions-1+5+5 {
		t.Errorf("call after 5 appended steps read %d step rows, want ≤ %d", r, sessions-1+5+5)
	}
	// s1 has 13 steps: truncated from 9 and written again up to 13.
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: s1, StartSeq: 9}); err != nil {
		t.Fatal(err)
	}
	appendSteps(s1, 5, steptype.StepFailed)
	same("after a truncation re-appended to the same sequence")
	if _, err := st.StepResolve(ctx, &store.StepResolveParams{ID: waiting.ID, Status: steptype.StepFailed, Content: "no", Now: tick()}); err != nil {
		t.Fatal(err)
	}
	same("after a waiting step was resolved")
	if r := same("warm, nothing waiting"); r > sessions {
		t.Errorf("warm call read %d step rows, want ≤ %d", r, sessions)
	}
	// Truncated below the last step held, nothing appended.
	if _, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: s3, StartSeq: 4}); err != nil {
		t.Fatal(err)
	}
	same("after a truncation")
	if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: s3}); err != nil {
		t.Fatal(err)
	}
	same("after a delete")
	// Created again under the same id, with as many steps as before.
	create(s3)
	appendSteps(s3, 3, steptype.StepFailed)
	same("after a session was created again")
	appendSteps(s2, 1, steptype.StepCompleted)
	same("after one more append")
}

// serveStore serves st on loopback with the given Config.ViewCacheBytes
// (0: the default).
func serveStore(t *testing.T, st store.Store, cacheBytes int64) string {
	t.Helper()
	eng, err := stepwise.New(stepwise.Config{Store: st, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	srv, err := New(Config{Engine: eng, Logger: testLogger(t), ViewCacheBytes: cacheBytes, StoreTimeout: time.Minute}) // as newEnvStore
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return ts.URL
}

// TestAgentViewsWarmReadsBounded: over a filled database (forks
// included), a repeated agent overview or graph reads at most one step row
// per session covered, and after new steps, those too; the answers stay
// those of a server that keeps nothing.
func TestAgentViewsWarmReadsBounded(t *testing.T) {
	e := newBigEnv(t, bench.FillConfig{Steps: 6000, Sessions: 120, Agents: 2, Seed: 5})
	agent := bench.AgentName(0)
	plain := serveStore(t, e.capable.Store, -1)
	for _, path := range []string{"/overview", "/graph", "/overview?sessions=500"} {
		url := "/v1/agents/" + agent + path
		getBody(t, e.capURL+url) // cold
		e.capable.reset()
		got := getBody(t, e.capURL+url)
		sessions := int64(defaultGraphSessions)
		if path == "/overview?sessions=500" {
			sessions = 500
		}
		if rows := e.capable.stepRows.Load(); rows > sessions {
			t.Errorf("warm GET %s read %d step rows, want ≤ %d (one per session)", url, rows, sessions)
		}
		if want := getBody(t, plain+url); string(got) != string(want) {
			t.Errorf("warm GET %s differs:\n got %.600s\nwant %.600s", url, got, want)
		}
	}
	// New steps in the newest session of the agent: read, and only them.
	page, err := e.capable.Store.SessionList(t.Context(), &store.SessionListParams{Agent: agent, Limit: 1})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatal(page, err)
	}
	var steps []*steptype.Step
	for i := range 7 {
		steps = append(steps, &steptype.Step{ID: stepwise.NewID(), SessionID: page.Sessions[0].ID, Kind: steptype.KindCustom, Name: "late", Status: steptype.StepCompleted, Content: fmt.Sprint(i)})
	}
	if _, err := e.capable.Store.StepAppend(t.Context(), &store.StepAppendParams{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	url := "/v1/agents/" + agent + "/graph"
	e.capable.reset()
	got := getBody(t, e.capURL+url)
	if rows := e.capable.stepRows.Load(); rows > defaultGraphSessions+7 {
		t.Errorf("GET %s after 7 new steps read %d step rows, want ≤ %d", url, rows, defaultGraphSessions+7)
	}
	if want := getBody(t, plain+url); string(got) != string(want) {
		t.Errorf("GET %s after new steps differs:\n got %.600s\nwant %.600s", url, got, want)
	}
}

// TestAgentViewsConcurrent: agent views served concurrently while steps
// are appended share the held steps and answers without races (run with
// -race), and the last answers equal those of a full read.
func TestAgentViewsConcurrent(t *testing.T) {
	st := memory.New()
	cached := serveStore(t, capableStore{&countingStore{Store: st}}, 0)
	plain := serveStore(t, st, -1)
	ctx := t.Context()
	var ids []string
	for i := range 6 {
		id := stepwise.NewID()
		ids = append(ids, id)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id, Agent: "conc", Now: time.Date(2030, 1, 1, 0, 0, i, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 60 {
			s := &steptype.Step{ID: stepwise.NewID(), SessionID: ids[i%len(ids)], Kind: steptype.KindTool, Name: "tools", ToolName: fmt.Sprint("t", i%3), Status: steptype.StepCompleted}
			if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{s}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			path := []string{"/overview", "/graph"}[w%2]
			for range 15 {
				res, err := http.Get(cached + "/v1/agents/conc" + path)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs <- fmt.Errorf("GET %s: %d", path, res.StatusCode)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	<-done
	for _, p := range []string{"/overview", "/graph"} {
		got, want := getBody(t, cached+"/v1/agents/conc"+p), getBody(t, plain+"/v1/agents/conc"+p)
		if string(got) != string(want) {
			t.Errorf("GET %s after concurrent calls differs:\n got %.600s\nwant %.600s", p, got, want)
		}
	}
}

// TestViewCacheBound: the cache holds at most its size in (estimated)
// bytes, dropping the least recently used session first; a session whose
// steps alone exceed the cache, or whose sequences have a gap, is not held.
func TestViewCacheBound(t *testing.T) {
	steps := func(sess string, n int) []*steptype.Step {
		out := make([]*steptype.Step, n)
		for i := range out {
			out[i] = &steptype.Step{ID: fmt.Sprintf("%s-%d", sess, i), SessionID: sess, Sequence: int64(i + 1), Kind: steptype.KindLLM, Status: steptype.StepCompleted}
		}
		return out
	}
	one := steps("s0", 10)
	per := int64(0)
	{
		probe := newViewCache(1 << 30)
		probe.put(&steptype.Session{ID: "s0"}, one, derive(one))
		_, per = probe.size()
	}
	c := newViewCache(3*per + per/2) // room for three sessions of 10 steps
	for i := range 5 {
		id := fmt.Sprintf("s%d", i)
		if c.put(&steptype.Session{ID: id}, steps(id, 10), derive(steps(id, 10))) == 0 {
			t.Fatalf("session %s not held", id)
		}
		if i == 2 && c.get(&steptype.Session{ID: "s0"}) == nil { // s0 becomes the most recently used
			t.Fatal("s0 dropped before the cache was full")
		}
	}
	n, used := c.size()
	if n != 3 || used > c.max {
		t.Fatalf("held %d sessions in %d bytes (max %d), want 3 within the bound", n, used, c.max)
	}
	for id, want := range map[string]bool{"s0": true, "s1": false, "s2": false, "s3": true, "s4": true} {
		if got := c.get(&steptype.Session{ID: id}) != nil; got != want {
			t.Errorf("session %s held = %v, want %v (least recently used dropped first)", id, got, want)
		}
	}
	big := steps("big", 40)
	if c.put(&steptype.Session{ID: "big"}, big, derive(big)) != 0 {
		t.Error("a session larger than the whole cache was held")
	}
	gap := steps("gap", 3)
	gap[2].Sequence = 9
	if c.put(&steptype.Session{ID: "gap"}, gap, derive(gap)) != 0 {
		t.Error("steps with a gap were held")
	}
	if n, used := c.size(); n != 3 || used > c.max {
		t.Fatalf("after refusals: %d sessions in %d bytes (max %d)", n, used, c.max)
	}
}
