package main_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServePrunes starts `stepwise serve --prune-older-than 1ms
// --prune-keep 2` on a database of five finished sessions: the scheduled
// prune runs at start and leaves the two most recent, which the API then
// lists. A negative age is refused before the server starts.
func TestServePrunes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	genDB(t, filepath.Join(dir, "s.db"), 5, 10)
	if _, e, code := stepwise(t, dir, "--db", "sqlite:s.db", "serve", "--prune-older-than", "-1h"); code != 2 || !strings.Contains(e, "negative") {
		t.Fatalf("serve --prune-older-than -1h: exit %d\n%s", code, e)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "--db", "sqlite:s.db", "serve", "--addr", addr, "--prune-older-than", "1ms", "--prune-keep", "2", "--prune-every", "1h")
	srv.Dir = dir
	srv.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	sc := bufio.NewScanner(out)
	var line string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "prune:") {
			line = sc.Text()
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if !strings.Contains(line, "deleted 3 sessions (30 steps)") {
		t.Fatalf("scheduled prune said %q", line)
	}
	// The first prune runs as the listener opens: poll until it answers.
	resp, err := http.Get("http://" + addr + "/v1/sessions")
	for i := 0; err != nil && i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
		resp, err = http.Get("http://" + addr + "/v1/sessions")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Sessions []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 2 || page.Sessions[0].ID != "s00004" || page.Sessions[1].ID != "s00003" {
		t.Errorf("sessions after the scheduled prune: %+v", page.Sessions)
	}
}
