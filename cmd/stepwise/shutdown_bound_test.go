package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// shutdownBound is the documented bound of a graceful stop of serve
// (docs/guarantees.md, Bounds): server.Config.ShutdownTimeout (30 s), then
// the engine's own stop (30 s) and its observers' (5 s, 1 s more if one
// ignores its context), the memory worker's stop (10 s), the listing of
// runs left leased (2 s) and the store's close (postgres.CloseTimeout).
const shutdownBound = 30*time.Second + 30*time.Second + 6*time.Second + 10*time.Second + 2*time.Second + postgres.CloseTimeout

// termWithin sends SIGTERM to a serve process and returns how long it took
// to exit; past shutdownBound the test fails.
func termWithin(t *testing.T, cmd *exec.Cmd, done <-chan struct{}, log *syncBuffer) time.Duration {
	t.Helper()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(shutdownBound):
		_ = cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, to the log
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("serve did not exit %v after SIGTERM; its log:\n%s", shutdownBound, log.String())
	}
	return time.Since(start)
}

// TestServeSIGTERMWhileDatabasePaused stops `stepwise serve` with SIGTERM
// while its PostgreSQL (a cluster of the test's own) is paused with a run
// executing and API requests waiting on the database: serve exits within
// the documented bound, and its log says what it could not finish. Before
// the store's close was bounded, it never exited (the connection pool
// waited for a connection stuck in a query).
func TestServeSIGTERMWhileDatabasePaused(t *testing.T) {
	t.Parallel()
	cl := pgtest.NewCluster(t)
	dir := t.TempDir()
	arrived := make(chan struct{}, 8)
	agent := fetchAgent(t, dir, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		fmt.Fprintf(w, "value of %s", r.URL.Path)
	})
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--db", cl.DSN(), "serve", "--addr", addr, "--agent", agent)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := c.Agents(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("serve did not start:\n%s", log.String())
		case <-time.After(20 * time.Millisecond): // a readiness probe
		}
	}
	if _, _, err := c.StartRun(ctx, "fetcher", "go"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("no tool call")
	}
	if err := cl.Pause(); err != nil {
		t.Fatal(err)
	}
	defer cl.Resume()
	// Requests waiting on the paused database.
	for range 3 {
		go func() { _, _ = c.Sessions(context.Background(), client.SessionQuery{}) }()
	}
	took := termWithin(t, cmd, done, &log)
	t.Logf("serve exited %v after SIGTERM with its database paused; its log:\n%s", took.Round(time.Millisecond), log.String())
	// It names what it gave up: the connections the pool's close left
	// behind, or the step events an observer could not deliver.
	if l := log.String(); !strings.Contains(l, "abandoned") && !strings.Contains(l, "dropped=") {
		t.Fatalf("serve's log does not say what it abandoned:\n%s", log.String())
	}
}
