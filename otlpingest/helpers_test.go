package otlpingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// env is a Stepwise server over a real SQLite file on a loopback port.
type env struct {
	t     testing.TB
	st    store.Store
	eng   *stepwise.Engine
	srv   *server.Server
	url   string
	token string
}

func newEnv(t testing.TB, cfg server.Config) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "otlp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	eng, err := stepwise.New(stepwise.Config{Store: st, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	cfg.Engine = eng
	if cfg.Tokens == nil {
		cfg.Tokens = []string{"secret-token"}
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, eng: eng, srv: srv, url: ts.URL, token: cfg.Tokens[0]}
}

// otelDeps holds the npm exporters and instrumentations.
var otelDeps = filepath.Join("..", "internal", "testdeps", "otel")

// runNode runs internal/testdeps/otel/export.mjs with a scenario and
// returns the trace id it printed. Missing npm packages fail the test when
// STEPWISE_REQUIRE_NPM=1, else skip it.
func (e *env) runNode(scenario string, extra ...string) string {
	e.t.Helper()
	return e.runScript("export.mjs", scenario, extra...)
}

// runScript runs a node script of internal/testdeps/otel with SCENARIO
// and the server's address and token in its environment, and returns the
// trace id it prints.
func (e *env) runScript(script, scenario string, extra ...string) string {
	t := e.t
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(otelDeps, "node_modules", "@opentelemetry", "sdk-trace-node", "package.json"))
	}
	if err != nil {
		msg := "OpenTelemetry npm test dependencies missing (" + err.Error() + "); install them with: npm ci --prefix internal/testdeps/otel"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = otelDeps
	cmd.Env = append(os.Environ(), append([]string{"STEPWISE_URL=" + e.url, "STEPWISE_TOKEN=" + e.token, "SCENARIO=" + scenario,
		"LANGSMITH_ENDPOINT=" + e.url + "/langsmith", "LANGSMITH_API_KEY=" + e.token, "LANGSMITH_TRACING=true"}, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if stderr.Len() > 0 {
		t.Logf("node %s stderr: %s", scenario, stderr.String())
	}
	if err != nil {
		t.Fatalf("node %s: %v\nstderr: %s\nstdout: %s", scenario, err, stderr.String(), out)
	}
	var res struct{ TraceID string }
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("node output %q: %v (stderr %s)", out, err, stderr.String())
	}
	return res.TraceID
}

// render is a compact, exact view of a step log.
func render(steps []*stepwise.Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%d %s %s", s.Sequence, s.Kind, s.Name)
		if s.Role != "" {
			fmt.Fprintf(&b, " role=%s", s.Role)
		}
		if s.Content != "" {
			fmt.Fprintf(&b, " content=%q", s.Content)
		}
		for _, c := range s.ToolCalls {
			fmt.Fprintf(&b, " call=%s:%s:%s", c.ID, c.Name, c.Arguments)
		}
		if s.ToolCallID != "" {
			fmt.Fprintf(&b, " answers=%s:%s", s.ToolCallID, s.ToolName)
		}
		if len(s.Inputs) > 0 && s.Kind == steptype.KindTool {
			fmt.Fprintf(&b, " args=%s", s.Inputs)
		}
		if s.Metrics.InputTokens+s.Metrics.OutputTokens > 0 {
			fmt.Fprintf(&b, " tokens=%d/%d", s.Metrics.InputTokens, s.Metrics.OutputTokens)
		}
		if s.Metrics.Model != "" {
			fmt.Fprintf(&b, " model=%s/%s", s.Metrics.Provider, s.Metrics.Model)
		}
		if s.Error != nil {
			fmt.Fprintf(&b, " error=%q", s.Error.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// waitSteps polls the session's step log until it has n steps (the
// exports are asynchronous to the node process only until it exits, but
// held spans are recorded by the background loop).
func (e *env) waitSteps(session string, n int) []*stepwise.Step {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		steps, err := e.st.StepList(context.Background(), &store.StepListParams{SessionID: session})
		if err != nil && time.Now().After(deadline) {
			e.t.Fatalf("steps of %s: %v", session, err)
		}
		if len(steps) >= n || time.Now().After(deadline) {
			return steps
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSession waits for the one session of agent.
func (e *env) waitSession(agent string) string {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		page, err := e.st.SessionList(context.Background(), &store.SessionListParams{Agent: agent})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page.Sessions) > 1 {
			e.t.Fatalf("%d sessions of %s, want 1", len(page.Sessions), agent)
		}
		if len(page.Sessions) == 1 {
			return page.Sessions[0].ID
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no session of %s", agent)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRun waits for a run to exist.
func (e *env) waitRun(id string) *stepwise.Run {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: id})
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s: %v", id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get fetches a JSON API path of the server.
func (e *env) get(path string, out any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		e.t.Fatal(err)
	}
}

// checkViews asserts the session shows in the dashboard's session list
// with its run status, and in the workflow graph endpoint.
func (e *env) checkViews(session string, steps int, status string) {
	e.t.Helper()
	var page struct {
		Sessions []map[string]any `json:"sessions"`
	}
	e.get("/v1/dashboard/sessions?limit=200", &page)
	found := false
	for _, row := range page.Sessions {
		b, _ := json.Marshal(row)
		if strings.Contains(string(b), session) {
			found = true
			if !strings.Contains(string(b), `"`+status+`"`) {
				e.t.Errorf("dashboard row of %s has no status %q: %s", session, status, b)
			}
		}
	}
	if !found {
		e.t.Errorf("session %s not in the dashboard list", session)
	}
	var g struct {
		Steps int              `json:"steps"`
		Nodes []map[string]any `json:"nodes"`
	}
	e.get("/v1/sessions/"+session+"/graph", &g)
	if g.Steps != steps || len(g.Nodes) == 0 {
		e.t.Errorf("graph of %s: %d steps, %d nodes; want %d steps", session, g.Steps, len(g.Nodes), steps)
	}
}

var _ = otlpingest.SessionID
