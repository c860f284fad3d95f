package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// serve runs with the streaming GC default (loadgen.DefaultGCPercent),
// --gc-percent changes it, and GOGC in the environment wins over both; the
// startup line reports the target in effect.
func TestServeGCPercent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"default", nil, "", "GC percent 400)"},
		{"flag", []string{"--gc-percent", "150"}, "", "GC percent 150)"},
		{"go default", []string{"--gc-percent", "0"}, "", "GC percent 100)"},
		{"environment", []string{"--gc-percent", "150"}, "GOGC=80", "GC percent 80)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if line := serveStartupLine(t, c.env, c.args...); !strings.Contains(line, c.want) {
				t.Fatalf("startup line %q, want it to report %q", line, c.want)
			}
		})
	}
}

// serve keeps the agent views' steps in a cache of --view-cache MiB
// (default server.DefaultViewCacheBytes, 0 off) and says so; a negative
// size is a usage error.
func TestServeViewCache(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "; view cache 32 MiB;"},
		{[]string{"--view-cache", "8"}, "; view cache 8 MiB;"},
		{[]string{"--view-cache", "0"}, "; view cache off;"},
	} {
		if line := serveStartupLine(t, "", c.args...); !strings.Contains(line, c.want) {
			t.Errorf("serve %v: startup line %q, want it to report %q", c.args, line, c.want)
		}
	}
	_, stderr, code := stepwise(t, t.TempDir(), "--db", "memory:", "serve", "--addr", freeAddr(t), "--view-cache", "-1")
	if code != 2 || !strings.Contains(stderr, "--view-cache") {
		t.Fatalf("serve --view-cache -1: exit %d, stderr %q; want a usage error (2) naming the flag", code, stderr)
	}
}

// serveStartupLine starts `stepwise serve` on a fresh SQLite file with
// args (and GOGC=gogc, empty for unset) and returns its first line.
func serveStartupLine(t *testing.T, gogc string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"--db", "sqlite:" + filepath.Join(dir, "db.sqlite"), "serve", "--addr", freeAddr(t)}, args...)...)
	cmd.Dir = dir
	// GOGC= (empty) is unset for the runtime and for serve.
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=", "GOGC="+strings.TrimPrefix(gogc, "GOGC="))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the startup line: %v", err)
	}
	if !strings.HasPrefix(line, "Stepwise serving ") {
		t.Fatalf("startup line %q", line)
	}
	return line
}
