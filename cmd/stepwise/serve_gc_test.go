package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// serve runs with the streaming GC default (server.DefaultGCPercent),
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
			dir := t.TempDir()
			args := append([]string{"--db", "sqlite:" + filepath.Join(dir, "db.sqlite"), "serve", "--addr", freeAddr(t)}, c.args...)
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			// GOGC= (empty) is unset for the runtime and for serve.
			cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=", "GOGC="+strings.TrimPrefix(c.env, "GOGC="))
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
			if !strings.HasPrefix(line, "Stepwise serving ") || !strings.Contains(line, c.want) {
				t.Fatalf("startup line %q, want it to report %q", line, c.want)
			}
		})
	}
}
