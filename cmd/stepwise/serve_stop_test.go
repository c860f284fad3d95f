package main_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// fetchAgent writes an agent that fetches /value/0../value/3 with http_get
// from a loopback server with handler h, one call per model turn (a single
// call runs on the run's own goroutine, two or more in parallel: the crash
// test covers those). It returns the agent file's path.
func fetchAgent(t *testing.T, dir string, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	var script strings.Builder
	script.WriteString("turns:\n")
	for i := range 4 {
		fmt.Fprintf(&script, "  - text: \"Fetching value %d.\"\n    tool_calls:\n      - {name: http_get, arguments: {url: \"http://%s/value/%d\"}}\n", i, host, i)
	}
	script.WriteString("  - text: \"Fetched them all.\"\n")
	agent := fmt.Sprintf("name: fetcher\nmodel: scripted:script.yaml\ntools:\n  - http_get: {allow_hosts: [%q]}\n", host)
	for name, body := range map[string]string{"agent.yaml": agent, "script.yaml": script.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent.yaml")
}

// serveProc is a running `stepwise serve`.
type serveProc struct {
	cmd *exec.Cmd
	url string
	log syncBuffer // its stderr (also copied to the test's)
}

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServe starts `stepwise serve` on a SQLite file db (with the agent
// file agent, when set, and the extra flags of serve) and waits until it
// answers.
func startServe(t *testing.T, dir, db, agent string, extra ...string) *serveProc {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"--db", "sqlite:" + db, "serve", "--addr", addr}
	if agent != "" {
		args = append(args, "--agent", agent)
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	p := &serveProc{cmd: cmd, url: "http://" + addr}
	cmd.Stderr = io.MultiWriter(os.Stderr, &p.log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(p.url + "/v1/agents"); err == nil {
			resp.Body.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// term stops the server with SIGTERM and waits for it to exit.
func (p *serveProc) term(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit 30s after SIGTERM")
	}
}

// TestServeSIGTERMDuringToolCalls stops `stepwise serve` with SIGTERM while
// an http_get call of the run is in flight, at three successive calls,
// restarting the server in between: each time nothing is committed for the interrupted
// call and the run is handed back; the restarted server resumes it, and the
// run completes with the transcript of an uninterrupted run.
func TestServeSIGTERMDuringToolCalls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	// While hold is set, the first call of each URL waits (until the server
	// stops); its re-run after the restart is answered.
	hold, seen := true, map[string]bool{}
	arrived := make(chan string, 64)
	agent := fetchAgent(t, dir, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := hold && !seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		if h {
			arrived <- r.URL.Path
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, "value of %s", r.URL.Path)
	})
	// The reference: an uninterrupted run through the same handler.
	refDB := filepath.Join(dir, "ref.db")
	mu.Lock()
	hold = false
	mu.Unlock()
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:"+refDB, "run", "--agent", agent, "--input", "go")
	if code != 0 {
		t.Fatalf("reference run: exit %d\n%s\n%s", code, out, errOut)
	}
	want := transcript(t, refDB, runLine.FindStringSubmatch(out)[1])
	mu.Lock()
	hold, seen = true, map[string]bool{}
	mu.Unlock()

	db := filepath.Join(dir, "serve.db")
	ctx := context.Background()
	var run *steptype.Run
	for turn := range 3 {
		srv := startServe(t, dir, db, agent)
		if run == nil {
			c, err := client.New(srv.url)
			if err != nil {
				t.Fatal(err)
			}
			if run, _, err = c.StartRun(ctx, "fetcher", "go"); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case path := <-arrived:
			if path != fmt.Sprintf("/value/%d", turn) {
				t.Fatalf("turn %d: http_get of %s", turn, path)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("turn %d: no http_get call", turn)
		}
		srv.term(t)
		st, err := sqlite.Open(ctx, sqlite.Config{Path: db, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		ss, err := st.StepList(ctx, &store.StepListParams{SessionID: run.SessionID})
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.RunGet(ctx, &store.RunGetParams{ID: run.ID})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			if s.Error != nil || s.Kind == steptype.KindError {
				t.Fatalf("turn %d: SIGTERM recorded a false error: step %d %s %q %+v", turn, s.Sequence, s.Kind, s.Content, s.Error)
			}
			if s.ToolName == "http_get" && strings.Contains(string(s.Inputs), fmt.Sprintf("/value/%d", turn)) {
				t.Fatalf("turn %d: the interrupted call was committed: %q", turn, s.Content)
			}
		}
		if r.Status != steptype.RunQueued || r.LeaseOwner != "" {
			t.Fatalf("turn %d: run %s (lease %q) after SIGTERM, want queued and released", turn, r.Status, r.LeaseOwner)
		}
	}
	mu.Lock()
	hold = false
	mu.Unlock()
	srv := startServe(t, dir, db, agent)
	c, err := client.New(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := c.Run(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			if r.Status != steptype.RunCompleted {
				t.Fatalf("resumed run %s %+v", r.Status, r.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s", r.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.term(t)
	if d := diff(transcript(t, db, run.SessionID), want); d != "" {
		t.Fatalf("transcript after three SIGTERMs differs from the uninterrupted run:\n%s", d)
	}
}
