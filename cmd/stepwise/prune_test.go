package main_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
)

func sessionsOf(t *testing.T, dir, db string) map[string]*steptype.Session {
	t.Helper()
	o, e, code := stepwise(t, dir, "--db", db, "sessions", "--json", "--limit", "1000")
	if code != 0 {
		t.Fatalf("sessions: %s", e)
	}
	var page struct{ Sessions []*steptype.Session }
	if err := json.Unmarshal([]byte(o), &page); err != nil {
		t.Fatal(err)
	}
	out := map[string]*steptype.Session{}
	for _, s := range page.Sessions {
		out[s.ID] = s
	}
	return out
}

func stepContents(t *testing.T, dir, db, session string) []string {
	t.Helper()
	o, e, code := stepwise(t, dir, "--db", db, "steps", session, "--json")
	if code != 0 {
		t.Fatalf("steps %s: %s", session, e)
	}
	var out []string
	dec := json.NewDecoder(strings.NewReader(o))
	for dec.More() {
		var s steptype.Step
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(s.Kind)+"|"+s.Content)
	}
	return out
}

// TestPruneForkSafe prunes the demo database through the binary: bad
// flags change nothing; the demo session is kept while its fork, the most
// recent session of the agent, reads through it; the waiting session is
// never touched; --dry-run deletes nothing; --materialize-forks lets the
// demo session go after its fork got its own steps, which read the same.
func TestPruneForkSafe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:p.db"
	run, req := demoDB(t, dir, db)
	all := sessionsOf(t, dir, db)
	var demo, fork, waiting string
	for id, s := range all {
		switch {
		case s.ParentSessionID != "":
			fork = id
		case s.Agent == "analyst":
			demo = id
		default:
			waiting = id
		}
	}
	if demo == "" || fork == "" || waiting == "" {
		t.Fatalf("demo database: %v", all)
	}
	forkSteps := stepContents(t, dir, db, fork)

	for _, bad := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--older-than", "-5m"}, 2, "negative"},
		{[]string{"--older-than", "soon"}, 2, "want a duration"},
		{[]string{"--keep", "-1"}, 2, "negative keep"},
		{[]string{}, 2, "nothing selects sessions"},
		{[]string{"--older-than", "1ms", "--agent", "nobody"}, 1, `unknown agent "nobody"`},
		{[]string{"--older-than", "1ms", "--status", "waiting"}, 2, "want completed, failed or cancelled"},
	} {
		_, e, code := stepwise(t, dir, append([]string{"--db", db, "prune"}, bad.args...)...)
		if code != bad.code || !strings.Contains(e, bad.msg) {
			t.Errorf("prune %v: exit %d, want %d with %q\n%s", bad.args, code, bad.code, bad.msg, e)
		}
	}
	if got := sessionsOf(t, dir, db); len(got) != 3 {
		t.Fatalf("refused prunes deleted sessions: %d left", len(got))
	}

	// Keep the newest session of each agent: the fork stays, so its parent
	// (the demo session) is kept for it.
	o, e, code := stepwise(t, dir, "--db", db, "prune", "--keep", "1", "--agent", "analyst")
	if code != 0 || !strings.Contains(o, "kept") || !strings.Contains(o, "reads through it") {
		t.Fatalf("prune --keep 1: exit %d\n%s\n%s", code, o, e)
	}
	if got := sessionsOf(t, dir, db); len(got) != 3 {
		t.Fatalf("fork-safe prune deleted a session: %v", got)
	}

	o, _, code = stepwise(t, dir, "--db", db, "prune", "--keep", "1", "--agent", "analyst", "--materialize-forks", "--dry-run")
	if code != 0 || !strings.Contains(o, "would delete") || !strings.Contains(o, "would materialise") || !strings.Contains(o, demo) {
		t.Fatalf("dry run: exit %d\n%s", code, o)
	}
	if got := sessionsOf(t, dir, db); len(got) != 3 {
		t.Fatal("--dry-run deleted sessions")
	}

	// The demo session goes once its fork is materialised.
	o, e, code = stepwise(t, dir, "--db", db, "prune", "--keep", "1", "--agent", "analyst", "--materialize-forks")
	if code != 0 || !strings.Contains(o, "materialised 1 forks") {
		t.Fatalf("prune --materialize-forks: exit %d\n%s\n%s", code, o, e)
	}
	got := sessionsOf(t, dir, db)
	if _, ok := got[demo]; ok {
		t.Errorf("demo session still there:\n%s", o)
	}
	if f, ok := got[fork]; !ok || f.ParentSessionID != "" || !slices.Equal(stepContents(t, dir, db, fork), forkSteps) {
		t.Errorf("materialised fork = %+v, steps %v, want its steps %v", f, stepContents(t, dir, db, fork), forkSteps)
	}
	// Everything older than 1ms: the waiting session has an unfinished
	// run and stays.
	o, _, code = stepwise(t, dir, "--db", db, "prune", "--older-than", "1ms")
	if code != 0 || !strings.Contains(o, "unfinished run") {
		t.Errorf("prune everything: exit %d\n%s", code, o)
	}
	if _, ok := sessionsOf(t, dir, db)[waiting]; !ok {
		t.Fatal("the session with a waiting run was pruned")
	}
	answerOn(t, dir, db, run, req)
}
