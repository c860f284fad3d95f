package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// proxy forwards TCP connections from a loopback address to target until
// closed; closing it drops every connection, as a database server that
// goes away does.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, addr, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// TestCopyResumesAfterDestinationGoesAway copies 20,000 steps from SQLite
// to PostgreSQL through a TCP proxy, drops the proxy once the copy has
// checkpointed (the destination goes away mid-copy), checks the error and
// that no run was written for a session whose steps are incomplete, then
// brings the destination back: the same command resumes after the
// checkpoint and finishes with every session verified.
func TestCopyResumesAfterDestinationGoesAway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pg := postgresSchemaDSN(t)
	genDB(t, filepath.Join(dir, "big.db"), 200, 100)
	u, _ := url.Parse(pg)
	target := u.Host
	px := startProxy(t, "127.0.0.1:0", target)
	addr := px.ln.Addr().String()
	u.Host = addr
	via := u.String()
	ckpt := filepath.Join(dir, "copy.ckpt")

	cmd := exec.Command(bin, "copy", "--from", "sqlite:big.db", "--to", via, "--checkpoint", ckpt, "--page", "20", "--quiet")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-exited:
			t.Fatalf("copy ended before it was interrupted: %v\n%s\n%s", err, stdout.String(), stderr.String())
		case <-tick.C:
			if _, err := os.Stat(ckpt); err == nil {
				break wait
			}
		}
	}
	px.close()
	<-exited
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "run the same command again to continue") {
		t.Fatalf("interrupted copy: exit %d\n%s", code, stderr.String())
	}
	t.Logf("interrupted copy said: %s", lastLine(stderr.String()))

	// Nothing half-claimed: every run on the destination belongs to a
	// session whose steps are all there.
	ctx := context.Background()
	dst, err := postgres.Open(ctx, postgres.Config{DSN: pg})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := dst.RunList(ctx, &store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 || len(runs) == 200 {
		t.Fatalf("%d runs copied before the interruption: want some, not all", len(runs))
	}
	for _, r := range runs {
		if n, err := dst.StepCount(ctx, &store.StepCountParams{SessionID: r.SessionID}); err != nil || n != 100 {
			t.Errorf("run %s is on the destination with %d of its session's 100 steps (%v)", r.ID, n, err)
		}
	}
	dst.Close()

	startProxy(t, addr, target)
	o, e, code := stepwise(t, dir, "copy", "--from", "sqlite:big.db", "--to", via, "--checkpoint", ckpt, "--page", "20", "--quiet")
	if code != 0 || !strings.Contains(e, "resuming the copy after session s") || !strings.Contains(o, "verified: all match") {
		t.Fatalf("resumed copy: exit %d\n%s\n%s", code, o, e)
	}
	if !strings.Contains(o, "sessions done by an earlier run") {
		t.Errorf("summary: %s", o)
	}
	dst, err = postgres.Open(ctx, postgres.Config{DSN: pg})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if runs, err := dst.RunList(ctx, &store.RunListParams{}); err != nil || len(runs) != 200 {
		t.Errorf("after the resumed copy: %d runs, %v", len(runs), err)
	}
	if _, err := os.Stat(ckpt); !os.IsNotExist(err) {
		t.Errorf("checkpoint left after the copy finished: %v", err)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestCopyBadInput: a corrupt source, a half-written source, a destination
// migrated by a newer stepwise, the memory driver. Each is a clear error
// and the destination is not created or not changed.
func TestCopyBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	genDB(t, filepath.Join(dir, "good.db"), 40, 50)
	good, err := os.ReadFile(filepath.Join(dir, "good.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "half.db"), good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte("not a database "), 1000)
	if err := os.WriteFile(filepath.Join(dir, "junk.db"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"half.db", "junk.db"} {
		_, e, code := stepwise(t, dir, "copy", "--from", "sqlite:"+src, "--to", "sqlite:out-"+src)
		if code != 1 || !strings.Contains(e, "corrupt") {
			t.Errorf("copy from %s: exit %d\n%s", src, code, e)
		}
		if _, err := os.Stat(filepath.Join(dir, "out-"+src)); !os.IsNotExist(err) {
			t.Errorf("copy from %s created its destination: %v", src, err)
		}
	}

	// A destination whose schema is newer than this binary.
	genDB(t, filepath.Join(dir, "newer.db"), 0, 0)
	db, err := sql.Open("sqlite", filepath.Join(dir, "newer.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO stepwise_schema (version_id, is_applied) VALUES (99999, 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, e, code := stepwise(t, dir, "copy", "--from", "sqlite:good.db", "--to", "sqlite:newer.db")
	if code != 1 || !strings.Contains(e, "schema version 99999") || !strings.Contains(e, "nothing was copied") {
		t.Errorf("copy into a newer schema: exit %d\n%s", code, e)
	}
	db, _ = sql.Open("sqlite", filepath.Join(dir, "newer.db"))
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sessions`).Scan(&n); err != nil || n != 0 {
		t.Errorf("newer destination holds %d sessions (%v)", n, err)
	}
	db.Close()

	for _, args := range [][]string{
		{"copy", "--from", "memory:", "--to", "sqlite:m.db"},
		{"copy", "--from", "sqlite:good.db"},
		{"copy", "--from", "sqlite:good.db", "--to", "good.db"},
	} {
		if _, e, code := stepwise(t, dir, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, e)
		}
	}
}
