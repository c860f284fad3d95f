package main_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// replayedLine is the last line of `stepwise replay`.
var replayedLine = regexp.MustCompile(`replayed into session \S+: run \S+ (\w+); (\d+) steps reused, (\d+) live`)

// TestReplayReportsEveryTurn: `stepwise replay` of a three-turn session
// waits for every turn and reports all of them, in-process and against a
// server (which queues the next turn when one ends).
func TestReplayReportsEveryTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "r.db")
	out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "analyst", "--input", "What is the population of Paris and Berlin?")
	m := runLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, input := range []string{"And Rome?", "And Madrid?"} {
		if out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "analyst", "--session", m[1], "--input", input); code != 0 {
			t.Fatalf("run %q: exit %d\n%s\n%s", input, code, out, errOut)
		}
	}
	report := func(args ...string) []string {
		t.Helper()
		out, errOut, code := stepwise(t, dir, append(args, "replay", m[1])...)
		r := replayedLine.FindStringSubmatch(out)
		if code != 0 || r == nil {
			t.Fatalf("replay %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return r[1:]
	}
	local := report("--db", db)
	if local[0] != "completed" || local[2] != "0" {
		t.Fatalf("local replay: %v", local)
	}
	url := launchServe(t, dir, nil, "--db", db)
	for i := 0; i < 3; i++ {
		if remote := report("--server", url); remote[0] != "completed" || remote[1] != local[1] || remote[2] != "0" {
			t.Fatalf("replay --server: %v, in-process: %v (status, steps reused, live)", remote, local)
		}
	}
}

// TestEditedForkPlace: a fork that edits step 5 is shown at step 5 (it
// shares 1..4), by forks and sessions, with its title saying the same.
func TestEditedForkPlace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "f.db")
	out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "analyst", "--input", "What is the population of Paris and Berlin?")
	m := runLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = stepwise(t, dir, "--db", db, "fork", m[1], "--at", "5", "--edit", "changed")
	fork := strings.TrimSpace(out)
	if code != 0 || fork == "" {
		t.Fatalf("fork: exit %d\n%s\n%s", code, out, errOut)
	}
	plain, _, _ := stepwise(t, dir, "--db", db, "fork", m[1], "--at", "3")
	plain = strings.TrimSpace(plain)
	out, _, code = stepwise(t, dir, "--db", db, "forks", m[1])
	if code != 0 || !strings.Contains(out, fork+" @5 (edited)") || !strings.Contains(out, plain+" @3 ") {
		t.Fatalf("forks:\n%s", out)
	}
	out, _, code = stepwise(t, dir, "--db", db, "sessions")
	if code != 0 || !strings.Contains(out, "at #5 (fork of "+m[1]+"@5 (edited))") || strings.Contains(out, "@4") {
		t.Fatalf("sessions:\n%s", out)
	}
}
