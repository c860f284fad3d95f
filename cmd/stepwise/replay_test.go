package main_test

import (
	"path/filepath"
	"regexp"
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
