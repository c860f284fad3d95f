package main_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// metricsDoc is the part of GET /v1/metrics the tests read.
type metricsDoc struct {
	Bucket string `json:"bucket"`
	Split  string `json:"split"`
	Series []struct {
		Key    string `json:"key"`
		Points []struct {
			Runs         int64    `json:"runs"`
			Steps        int64    `json:"steps"`
			InputTokens  int64    `json:"input_tokens"`
			LatencyP50Ms float64  `json:"latency_p50_ms"`
			EvalScoreAvg *float64 `json:"eval_score_avg"`
		} `json:"points"`
	} `json:"series"`
}

// totals sums runs, steps and input tokens per series key.
func (m *metricsDoc) totals() map[string][3]int64 {
	out := map[string][3]int64{}
	for _, s := range m.Series {
		var t [3]int64
		for _, p := range s.Points {
			t[0] += p.Runs
			t[1] += p.Steps
			t[2] += p.InputTokens
		}
		out[s.Key] = t
	}
	return out
}

// addTotals sums two totals.
func addTotals(a, b [3]int64) [3]int64 { return [3]int64{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }

// launchServe starts `stepwise serve` on a free loopback port with args
// (and the extra environment env) and returns its URL once it answers; the
// server is killed when the test ends.
func launchServe(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, append(args, "serve", "--addr", addr)...)
	srv.Dir = dir
	srv.Env = append(append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER="), env...)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(url + "/v1/agents"); err == nil {
			resp.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(50 * time.Millisecond) // polling for the port; nothing to wait on
	}
}

// TestMetrics runs agents with session metadata through the binary, then
// reads the time series with `stepwise metrics` (table and --json), with
// --server against `stepwise serve`, and over HTTP, bad parameters included.
func TestMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "m.db")
	for _, tier := range []string{"gold", "gold", "free"} {
		if out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "analyst", "--meta", "tier="+tier,
			"--input", "What is the population of Paris and Berlin?"); code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	out, errOut, code := stepwise(t, dir, "--db", db, "metrics", "--split", "tier", "--json")
	if code != 0 {
		t.Fatalf("metrics --json: exit %d %s", code, errOut)
	}
	var m metricsDoc
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("metrics --json: %v\n%s", err, out)
	}
	tot := m.totals()
	// Each analyst run calls a sub-agent (a second run in the session).
	if m.Bucket != "hour" || m.Split != "tier" || len(m.Series) != 2 {
		t.Fatalf("metrics split by tier: bucket %q split %q, %d series", m.Bucket, m.Split, len(m.Series))
	}
	if g, f := tot["gold"], tot["free"]; f[0] == 0 || f[1] == 0 || f[2] == 0 || g != [3]int64{2 * f[0], 2 * f[1], 2 * f[2]} {
		t.Fatalf("runs, steps, input tokens: gold %v, free %v (want gold = 2 × free, non-zero)", g, f)
	}

	out, _, code = stepwise(t, dir, "--db", db, "metrics", "--bucket", "minute", "--last", "2h")
	if code != 0 || !strings.Contains(out, "RUNS") || !strings.Contains(out, "all agents") || !strings.Contains(out, "empty buckets not shown") {
		t.Fatalf("metrics table: exit %d\n%s", code, out)
	}
	// Days are a unit of --last as of prune --older-than.
	out, errOut, code = stepwise(t, dir, "--db", db, "metrics", "--bucket", "day", "--last", "7d", "--json")
	var week metricsDoc
	if code != 0 || json.Unmarshal([]byte(out), &week) != nil || week.totals()[""] != addTotals(tot["gold"], tot["free"]) {
		t.Fatalf("metrics --last 7d: exit %d %s\n%s", code, errOut, out)
	}
	// A split key no session has says so; an agent no session or built-in
	// names is an error.
	out, errOut, code = stepwise(t, dir, "--db", db, "metrics", "--split", "agent")
	if code != 0 || !strings.Contains(out, "(none)") || !strings.Contains(errOut, `no session in this range has the metadata key "agent"`) ||
		!strings.Contains(errOut, "--agent NAME") {
		t.Fatalf("metrics --split agent: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code = stepwise(t, dir, "--db", db, "metrics", "--agent", "nope"); code != 1 || !strings.Contains(errOut, `unknown agent "nope"`) {
		t.Fatalf("metrics --agent nope: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code = stepwise(t, dir, "--db", db, "metrics", "--agent", "operator"); code != 0 || !strings.Contains(out, "no runs, steps or evals") {
		t.Fatalf("metrics --agent operator (built in, no runs): exit %d\n%s\n%s", code, out, errOut)
	}
	for _, bad := range [][]string{{"--last", "-7d"}, {"--last", "7w"}, {"--bucket", "week"}, {"--bucket", "minute", "--last", "48h"}, {"--from", "yesterday"}, {"--split", "a b"}} {
		if _, errOut, code := stepwise(t, dir, append([]string{"--db", db, "metrics"}, bad...)...); code != 2 || errOut == "" {
			t.Errorf("metrics %v: exit %d %q, want usage error (2)", bad, code, errOut)
		}
	}

	url := launchServe(t, dir, nil, "--db", db)
	remote := func(args ...string) map[string][3]int64 {
		out, errOut, code := stepwise(t, dir, append([]string{"--server", url, "metrics", "--split", "tier", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("remote metrics %v: exit %d %s", args, code, errOut)
		}
		var rm metricsDoc
		if err := json.Unmarshal([]byte(out), &rm); err != nil {
			t.Fatal(err)
		}
		return rm.totals()
	}
	if got := remote(); got["gold"] != tot["gold"] || got["free"] != tot["free"] {
		t.Fatalf("remote metrics %v, local %v", got, tot)
	}
	if _, errOut, code := stepwise(t, dir, "--server", url, "metrics", "--agent", "nope"); code != 1 || !strings.Contains(errOut, `unknown agent "nope"`) {
		t.Fatalf("remote metrics --agent nope: exit %d %s", code, errOut)
	}
	if got := remote("--agent", "analyst"); got["gold"][0] != 2 || got["free"][0] != 1 || got["gold"][1] >= tot["gold"][1] {
		t.Fatalf("remote metrics of agent analyst %v (all agents: %v)", got, tot)
	}
	// search --server asks the server (this directory has no local database
	// at the default path); the server embeds its steps in the background.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errOut, code := stepwise(t, dir, "--server", url, "search", "population of Paris", "--json")
		var res struct {
			Steps []json.RawMessage `json:"steps"`
		}
		if code == 0 && json.Unmarshal([]byte(out), &res) == nil && len(res.Steps) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("search --server: exit %d\n%s\n%s", code, out, errOut)
		}
		time.Sleep(100 * time.Millisecond) // the server's embedding sweep has no event to wait on
	}
	resp, err := http.Get(url + "/v1/metrics?bucket=minute&from=2026-01-01T00:00:00Z&to=2026-01-03T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "2000") {
		t.Fatalf("too many buckets: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// TestMetricsForksInheritMetadata: forks, retries and replays of a session
// fall under its metadata in metrics --split, not under (none) — a retry
// from step 1 and an edit of step 1 too, which share no step and so are
// new root sessions.
func TestMetricsForksInheritMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "f.db")
	out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "analyst", "--meta", "tier=gold", "--input", "What is the population of Paris and Berlin?")
	m := runLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, args := range [][]string{{"replay", m[1]}, {"retry", m[1], "--from", "2"}, {"retry", m[1], "--from", "1"}, {"fork", m[1], "--at", "2"}} {
		if out, errOut, code := stepwise(t, dir, append([]string{"--db", db}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	out, errOut, code = stepwise(t, dir, "--db", db, "fork", m[1], "--at", "1", "--edit", "What is the population of Rome?")
	if code != 0 {
		t.Fatalf("edit at 1: exit %d\n%s\n%s", code, out, errOut)
	}
	edited := strings.TrimSpace(out)
	out, errOut, code = stepwise(t, dir, "--db", db, "sessions", "--json")
	var page struct{ Sessions []*steptype.Session }
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil {
		t.Fatalf("sessions: exit %d %s\n%s", code, errOut, out)
	}
	found := false
	for _, s := range page.Sessions {
		if s.ID != edited {
			continue
		}
		found = true
		var meta map[string]any
		if json.Unmarshal(s.Metadata, &meta) != nil || meta["tier"] != "gold" || meta["forked_from"] != m[1] {
			t.Errorf("edit of step 1: metadata %s, want tier gold and forked_from %s", s.Metadata, m[1])
		}
	}
	if !found {
		t.Errorf("edited fork %s not listed", edited)
	}
	out, errOut, code = stepwise(t, dir, "--db", db, "metrics", "--split", "tier", "--json")
	var doc metricsDoc
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("metrics: exit %d %s\n%s", code, errOut, out)
	}
	tot := doc.totals()
	if _, ok := tot[""]; ok || tot["gold"][0] < 3 {
		t.Fatalf("runs per tier %v: want every run (the original, its replay and its retry, with sub-agents) under gold", tot)
	}
}
