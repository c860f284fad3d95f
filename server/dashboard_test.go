package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/dashboard"
	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/wire"
)

// dashEnv is a server mounted with WithDashboard on a loopback httptest
// server.
type dashEnv struct {
	eng *stepwise.Engine
	st  store.Store
	srv *Server
	url string
}

func newDashEnv(t *testing.T, tokens ...string) *dashEnv {
	t.Helper()
	st := memory.New()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	calc := tool.Func(llm.ToolDef{Name: "calc", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *tool.Call) (*tool.Result, error) { return &tool.Result{Content: "42"}, nil })
	m := scripted.New("dash", scripted.Script{Strict: true, Loop: true, Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{Name: "calc", Arguments: json.RawMessage(`{"x":1}`)}}},
		{Text: "42"},
	}})
	eng, err := stepwise.New(stepwise.Config{Store: st, Logger: quiet, PollInterval: 20 * time.Millisecond,
		Agents: []*stepwise.Agent{{Name: "chat", Model: m, Tools: []tool.Tool{calc}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Logger: quiet, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.WithDashboard(dashboard.Config{}))
	t.Cleanup(func() { srv.Close(); ts.Close(); _ = eng.Close() })
	return &dashEnv{eng: eng, st: st, srv: srv, url: ts.URL}
}

// do sends a request; hdr are header name/value pairs.
func (e *dashEnv) do(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (e *dashEnv) get(t *testing.T, path string, v any) int {
	t.Helper()
	code, b := e.do(t, "GET", path, "")
	if v != nil && code == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return code
}

func (e *dashEnv) run(t *testing.T, input string) *stepwise.Run {
	t.Helper()
	r, err := e.eng.Wait(context.Background(), e.eng.Run(context.Background(), stepwise.StartParams{Agent: "chat", Input: input}))
	if err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("run: %v %+v", err, r)
	}
	return r
}

func problemCode(t *testing.T, b []byte) string {
	t.Helper()
	var p Problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem: %s", b)
	}
	return p.Code
}

func TestSessionGraphEndpoint(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	r := e.run(t, "hi")
	var g graph.Graph
	if code := e.get(t, "/v1/sessions/"+r.SessionID+"/graph", &g); code != 200 {
		t.Fatalf("status %d", code)
	}
	if g.Steps != 4 || len(g.Nodes) != 3 || g.Loops != 1 || g.Width <= 0 {
		t.Fatalf("graph: steps=%d nodes=%d loops=%d width=%v", g.Steps, len(g.Nodes), g.Loops, g.Width)
	}
	// Bad parameters and unknown sessions are client errors.
	for path, want := range map[string]int{
		"/v1/sessions/" + r.SessionID + "/graph?repeat=1":       400,
		"/v1/sessions/" + r.SessionID + "/graph?max_nodes=x":    400,
		"/v1/sessions/" + r.SessionID + "/graph?max_nodes=9999": 400,
		"/v1/sessions/nope/graph":                               404,
	} {
		if code, b := e.do(t, "GET", path, ""); code != want {
			t.Errorf("GET %s = %d %s, want %d", path, code, b, want)
		}
	}
}

func TestAgentGraphAndOverview(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	a := e.run(t, "one")
	e.run(t, "two")
	// A fork shares a's steps: they count once in the merged graph.
	if _, err := e.eng.Fork(context.Background(), stepwise.ForkParams{SessionID: a.SessionID, At: 2}); err != nil {
		t.Fatal(err)
	}
	var g graph.Graph
	if code := e.get(t, "/v1/agents/chat/graph", &g); code != 200 {
		t.Fatalf("status %d", code)
	}
	if g.Sessions != 2 || g.Steps != 8 || len(g.Nodes) != 3 {
		t.Fatalf("merged graph: sessions=%d steps=%d nodes=%d", g.Sessions, g.Steps, len(g.Nodes))
	}
	var o wire.AgentOverview
	if code := e.get(t, "/v1/agents/chat/overview", &o); code != 200 {
		t.Fatalf("status %d", code)
	}
	if !o.Registered || o.Sessions != 3 || o.Steps != 8 || o.RunsTotal != 2 || o.Runs[steptype.RunCompleted] != 2 || o.ErrorRate != 0 {
		t.Fatalf("overview %+v", o)
	}
	if o.RepeatedStepRatio != 5.0/8 || len(o.Latency) != 3 || o.Latency[0].Kind != steptype.KindUser || o.OutputTokens == 0 {
		t.Fatalf("overview ratio=%v latency=%+v", o.RepeatedStepRatio, o.Latency)
	}
	// ?sessions=1 covers the newest session only and says so.
	if e.get(t, "/v1/agents/chat/overview?sessions=1", &o); o.Sessions != 1 || !o.Truncated {
		t.Fatalf("sessions=1: %+v", o)
	}
	// An agent known only from recorded sessions is not registered but has
	// an overview; a name nobody used is 404.
	if _, err := e.eng.CreateSession(context.Background(), "remote", ""); err != nil {
		t.Fatal(err)
	}
	if code := e.get(t, "/v1/agents/remote/overview", &o); code != 200 || o.Registered {
		t.Fatalf("remote agent: %d %+v", code, o)
	}
	if code, b := e.do(t, "GET", "/v1/agents/nobody/graph", ""); code != 404 || problemCode(t, b) != CodeUnknownAgent {
		t.Fatalf("unknown agent: %d %s", code, b)
	}
	if code, _ := e.do(t, "GET", "/v1/agents/chat/overview?sessions=501", ""); code != 400 {
		t.Fatalf("sessions=501: %d", code)
	}
}

func TestLatencyPercentiles(t *testing.T) {
	t.Parallel()
	d := make([]float64, 100)
	for i := range d {
		d[i] = float64(100 - i) // 100..1, unsorted
	}
	l := latencyOf(steptype.KindLLM, d)
	if l.Count != 100 || l.P50MS != 50 || l.P90MS != 90 || l.P99MS != 99 || l.MaxMS != 100 || l.MeanMS != 50.5 {
		t.Fatalf("%+v", l)
	}
	if l := latencyOf(steptype.KindTool, []float64{7}); l.P50MS != 7 || l.P99MS != 7 {
		t.Fatalf("one value: %+v", l)
	}
}

func TestDashboardSessionRows(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	r := e.run(t, "hi")
	idle, err := e.eng.CreateSession(context.Background(), "chat", "empty")
	if err != nil {
		t.Fatal(err)
	}
	var page wire.SessionRowPage
	if code := e.get(t, "/v1/dashboard/sessions", &page); code != 200 || len(page.Sessions) != 2 {
		t.Fatalf("rows %d %+v", code, page)
	}
	byID := map[string]*wire.SessionRow{}
	for _, row := range page.Sessions {
		byID[row.ID] = row
	}
	if row := byID[r.SessionID]; row.Status != "completed" || row.RunID != r.ID || row.Runs != 1 || row.LastSequence != 4 {
		t.Fatalf("run row %+v", row)
	}
	if row := byID[idle.ID]; row.Status != StatusIdle || row.Runs != 0 {
		t.Fatalf("idle row %+v", row)
	}
	// Status filter, several statuses, and pages of one with a cursor.
	if e.get(t, "/v1/dashboard/sessions?status=idle", &page); len(page.Sessions) != 1 || page.Sessions[0].ID != idle.ID {
		t.Fatalf("status=idle: %+v", page.Sessions)
	}
	if e.get(t, "/v1/dashboard/sessions?status=failed,running", &page); len(page.Sessions) != 0 {
		t.Fatalf("status=failed,running: %+v", page.Sessions)
	}
	seen := map[string]bool{}
	for cursor, pages := "", 0; ; pages++ {
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
		page = wire.SessionRowPage{}
		e.get(t, "/v1/dashboard/sessions?limit=1&cursor="+cursor, &page)
		for _, row := range page.Sessions {
			seen[row.ID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 2 {
		t.Fatalf("pages saw %d sessions", len(seen))
	}
	for _, path := range []string{"/v1/dashboard/sessions?status=bogus", "/v1/dashboard/sessions?limit=201", "/v1/dashboard/sessions?limit=-1"} {
		if code, _ := e.do(t, "GET", path, ""); code != 400 {
			t.Errorf("GET %s = %d, want 400", path, code)
		}
	}
	var runs wire.RunList
	if code := e.get(t, "/v1/sessions/"+r.SessionID+"/runs", &runs); code != 200 || len(runs.Runs) != 1 || runs.Runs[0].ID != r.ID {
		t.Fatalf("session runs %d %+v", code, runs)
	}
	if code, _ := e.do(t, "GET", "/v1/sessions/nope/runs", ""); code != 404 {
		t.Fatalf("runs of an unknown session: %d", code)
	}
}

// State-changing requests from another origin are refused before they do
// anything; same-origin browsers and non-browser clients pass.
func TestCrossSiteGuard(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	count := func() int {
		page, err := e.st.SessionList(context.Background(), &store.SessionListParams{})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Sessions)
	}
	cases := []struct {
		name string
		hdr  []string
		want int
	}{
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}, 403},
		{"same-site other port", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://localhost:9999"}, 403},
		{"old browser, foreign origin", []string{"Origin", "http://evil.example"}, 403},
		{"same-origin page", []string{"Sec-Fetch-Site", "same-origin", "Origin", e.url, "X-Stepwise-CSRF", "1"}, 201},
		{"non-browser client", nil, 201},
	}
	for _, c := range cases {
		before := count()
		code, b := e.do(t, "POST", "/v1/sessions", `{"agent":"chat"}`, c.hdr...)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.want)
			continue
		}
		if c.want == 403 {
			if problemCode(t, b) != CodeCrossSite || count() != before {
				t.Errorf("%s: refused with %s, sessions %d → %d", c.name, b, before, count())
			}
		}
	}
	// Reads stay open to cross-site navigation (they change nothing).
	if code, _ := e.do(t, "GET", "/v1/sessions", "", "Sec-Fetch-Site", "cross-site"); code != 200 {
		t.Fatalf("cross-site GET: %d", code)
	}
	// Without tokens, only loopback host names are served (DNS rebinding).
	for host, want := range map[string]int{"evil.example:7700": 403, "localhost:7700": 200, "127.0.0.1": 200, "[::1]:7700": 200} {
		code, b := e.do(t, "GET", "/v1/sessions", "", "Host", host)
		if code != want {
			t.Errorf("Host %s: %d %s, want %d", host, code, b, want)
		}
		if want == 403 && problemCode(t, b) != CodeHostNotAllowed {
			t.Errorf("Host %s: %s", host, b)
		}
	}
}

// The dashboard's page and assets need no token (they hold no data); the
// API still does. The dashboard routes register once however often the
// dashboard is mounted.
func TestWithDashboardMount(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, "s3cret")
	code, body := e.do(t, "GET", "/", "", "Host", "stepwise.example")
	if code != 200 || !strings.Contains(string(body), `<script type="module" src="assets/js/app.js`) {
		t.Fatalf("GET / = %d %s", code, body)
	}
	if code, _ := e.do(t, "GET", "/assets/js/api.js", "", "Host", "stepwise.example"); code != 200 {
		t.Fatalf("asset: %d", code)
	}
	if code, _ := e.do(t, "GET", "/v1/dashboard/sessions", ""); code != 401 {
		t.Fatalf("API without token: %d", code)
	}
	if code, _ := e.do(t, "GET", "/v1/dashboard/sessions", "", "Authorization", "Bearer s3cret"); code != 200 {
		t.Fatalf("API with token: %d", code)
	}
	if code, b := e.do(t, "GET", "/nope", "", "Authorization", "Bearer s3cret"); code != 404 || problemCode(t, b) != CodeRouteNotFound {
		t.Fatalf("GET /nope = %d %s", code, b)
	}
	_ = e.srv.WithDashboard(dashboard.Config{}) // again: no duplicate registration panic
	n := 0
	for _, rt := range e.srv.routes {
		if rt.pattern == "/v1/dashboard/sessions" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("dashboard sessions route registered %d times", n)
	}
}

func ExampleServer_WithDashboard() {
	st := memory.New()
	eng, _ := stepwise.New(stepwise.Config{Store: st})
	defer eng.Close()
	srv, _ := New(Config{Engine: eng})
	defer srv.Close()
	h := srv.WithDashboard(dashboard.Config{Title: "My agents"})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:7700/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}

// The dashboard endpoints are documented: one operation per route, every
// schema reference resolvable.
func TestDashboardOpenAPI(t *testing.T) {
	t.Parallel()
	all := schemas()
	for k, v := range dashboardSchemas() {
		all[k] = v
	}
	var s Server
	routes := map[string]bool{}
	for _, rt := range s.dashboardRoutes() {
		routes[rt.method+" "+rt.pattern] = true
	}
	for _, op := range dashboardOps() {
		key := op.method + " " + op.path
		if !routes[key] {
			t.Errorf("documented but not routed: %s", key)
		}
		delete(routes, key)
		if op.resp != "" && all[op.resp] == nil {
			t.Errorf("%s: schema %s undefined", key, op.resp)
		}
	}
	for key := range routes {
		t.Errorf("routed but not documented: %s", key)
	}
	b, _ := json.Marshal(dashboardSchemas())
	for _, m := range regexp.MustCompile(`#/components/schemas/(\w+)`).FindAllStringSubmatch(string(b), -1) {
		if all[m[1]] == nil {
			t.Errorf("unresolved reference to %s", m[1])
		}
	}
}
