package main_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAndRemoteCLI starts `stepwise serve` and drives it with the CLI
// in --server mode: a run executed by the server and streamed to the client,
// the session list, the steps, and a refused public address without tokens.
func TestServeAndRemoteCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "--db", "sqlite:"+filepath.Join(dir, "s.db"), "serve", "--addr", addr)
	srv.Dir = dir
	srv.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	url := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(url + "/v1/agents"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			t.Fatal("server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, err := http.Get(url + "/"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %v %v", err, resp)
	}
	out, errOut, code := stepwise(t, dir, "--server", url, "run", "--agent", "analyst", "--input", "What is the population of Paris and Berlin?")
	if code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "lookup_population") {
		t.Fatalf("remote run: exit %d\n%s\n%s", code, out, errOut)
	}
	m := runLine.FindStringSubmatch(out)
	out, _, code = stepwise(t, dir, "--server", url, "sessions")
	if code != 0 || !strings.Contains(out, m[1]) {
		t.Fatalf("remote sessions: %d\n%s", code, out)
	}
	out, _, code = stepwise(t, dir, "--server", url, "steps", m[1], "--from", "1", "--to", "2")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("remote steps: %d\n%s", code, out)
	}
	if _, errOut, code := stepwise(t, dir, "--server", url, "steps", "nope"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("remote unknown session: %d %q", code, errOut)
	}
	// A public address without tokens is refused before anything starts.
	_, errOut, code = stepwise(t, dir, "--db", "memory:", "serve", "--addr", fmt.Sprintf("0.0.0.0:%d", 1))
	if code == 0 || !strings.Contains(strings.ToLower(errOut), "token") {
		t.Fatalf("public address without tokens: exit %d %q", code, errOut)
	}
}
