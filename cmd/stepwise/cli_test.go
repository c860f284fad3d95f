package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
)

func TestDemoNoServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, errOut, code := stepwise(t, dir, "demo", "--no-serve", "--fast")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"decision", "rate_limited", "lookup_population", "summarizer", "completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".stepwise", "stepwise.db")); err != nil {
		t.Fatalf("default database not created: %v", err)
	}
	// Steps as JSON lines in the v1 wire format.
	m := runLine.FindStringSubmatch(out)
	out, _, code = stepwise(t, dir, "steps", m[1], "--json", "--from", "2", "--to", "4")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("steps --json: exit %d, %d lines\n%s", code, len(lines), out)
	}
	var s steptype.Step
	if err := json.Unmarshal([]byte(lines[0]), &s); err != nil || s.Sequence != 2 || !strings.HasPrefix(lines[0], `{"v":1`) {
		t.Fatalf("step line %q: %v", lines[0], err)
	}
	out, _, code = stepwise(t, dir, "trace", m[1])
	if code != 0 || !strings.Contains(out, "Decision Purpose: Route the request") || !strings.Contains(out, "Call Program: summarizer") {
		t.Fatalf("trace: %d\n%s", code, out)
	}
	// One header per step; a model step that only calls tools has no empty
	// Assistant line.
	headers := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--- Step ") {
			if headers[line]++; headers[line] == 2 {
				t.Errorf("trace repeats the header %q:\n%s", line, out)
			}
		}
		if line == "Assistant:" {
			t.Errorf("trace has an empty Assistant line:\n%s", out)
		}
	}
	if !strings.Contains(out, "Tool Call: ") || !strings.Contains(out, "End Program: summarizer") {
		t.Errorf("trace lacks tool calls or the end of the sub-agent's call:\n%s", out)
	}
	out, _, code = stepwise(t, dir, "summary", m[1])
	if code != 0 || !strings.Contains(out, `"total_steps"`) {
		t.Fatalf("summary: %d\n%s", code, out)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: ok\nmodel: scripted:x.yaml\nlimits:\n  max_steps: -3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"invalid agent file", []string{"run", "--agent", bad, "--input", "x"}, 1, "bad.yaml:4"},
		{"missing agent file", []string{"run", "--agent", filepath.Join(dir, "none.yaml"), "--input", "x"}, 1, "no such file"},
		{"unknown agent", []string{"run", "--agent", "nobody", "--input", "x"}, 1, "unknown agent"},
		{"unknown session", []string{"run", "--agent", "analyst", "--input", "x", "--session", "nope"}, 1, "not found"},
		{"unknown run", []string{"resume", "nope"}, 1, "not found"},
		{"unknown session steps", []string{"steps", "nope"}, 1, "not found"},
		{"bad range", []string{"steps", "x", "--from", "5", "--to", "2"}, 2, "invalid range"},
		{"fork at 0", []string{"fork", "nope", "--at", "0"}, 1, "not found"},
		{"missing flag", []string{"run", "--input", "x"}, 2, "--agent is required"},
	}
	// Read-only commands do not create a database.
	if _, errOut, code := stepwise(t, dir, "--db", "sqlite:"+filepath.Join(dir, "x.db"), "sessions"); code != 1 || !strings.Contains(errOut, "no database at") {
		t.Fatalf("sessions on a missing database: exit %d %q", code, errOut)
	}
	if _, errOut, code := stepwise(t, dir, "--db", "sqlite:"+filepath.Join(dir, "x.db"), "demo", "--no-serve", "--fast"); code != 0 {
		t.Fatalf("demo: %s", errOut)
	}
	for _, c := range cases {
		_, errOut, code := stepwise(t, dir, append([]string{"--db", "sqlite:" + filepath.Join(dir, "x.db")}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d containing %q", c.name, code, errOut, c.code, c.want)
		}
	}
}

func TestCorruptAndLockedDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.db")
	junk := []byte(strings.Repeat("this is not a database ", 400))
	if err := os.WriteFile(corrupt, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := stepwise(t, dir, "--db", "sqlite:"+corrupt, "run", "--agent", "analyst", "--input", "x")
	if code != 1 || !strings.Contains(errOut, "not a database") {
		t.Fatalf("corrupt: exit %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(corrupt); string(b) != string(junk) {
		t.Fatal("corrupt file was modified")
	}
	// A second process writing the same database gets a clear error.
	db := filepath.Join(dir, "shared.db")
	first := exec.Command(bin, "--db", "sqlite:"+db, "demo", "--no-serve")
	first.Dir = dir
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait()
	// The first process holds the database (lock taken, schema written)
	// once it prints the run it started.
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !runLine.MatchString(sc.Text()) {
	}
	if sc.Err() != nil || !runLine.MatchString(sc.Text()) {
		t.Fatalf("the first process printed no run line (%v)", sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	_, errOut, code = stepwise(t, dir, "--db", "sqlite:"+db, "run", "--agent", "analyst", "--input", "x")
	if code != 1 || !strings.Contains(errOut, "in use by another stepwise process") {
		t.Fatalf("second writer: exit %d %q", code, errOut)
	}
	// Readers still work while the writer holds the database.
	if _, errOut, code := stepwise(t, dir, "--db", "sqlite:"+db, "sessions"); code != 0 {
		t.Fatalf("sessions while locked: %s", errOut)
	}
}

// TestRunNamesUntitledSession: `stepwise run` without a title names the
// new session after its first message, and a fork of it is named after
// that message in quotes, as before; `sessions` lists both by name.
func TestRunNamesUntitledSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "n.db")
	out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "analyst", "--input", "What is the population of Paris and Berlin?")
	m := runLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := stepwise(t, dir, "--db", db, "fork", m[1], "--at", "1"); code != 0 {
		t.Fatalf("fork: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = stepwise(t, dir, "--db", db, "sessions")
	if code != 0 {
		t.Fatalf("sessions: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"  What is the population of Paris and Berlin?\n", `fork of "What is the population of Paris and Ber…" at #1`} {
		if !strings.Contains(out, want) {
			t.Errorf("sessions lacks %q:\n%s", want, out)
		}
	}
}
