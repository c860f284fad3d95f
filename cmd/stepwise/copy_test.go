package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// demoDB builds a database the way a user does: the demo agent's session
// (sub-agent, tools, vectors), a fork of it, a run of the human-input
// agent waiting for its answer, and a user score. It returns the waiting
// run and its request.
func demoDB(t *testing.T, dir, db string) (run, req string) {
	t.Helper()
	if o, e, code := stepwise(t, dir, "--db", db, "demo", "--fast", "--no-serve"); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, o, e)
	}
	sid := firstSession(t, dir, db)
	if o, e, code := stepwise(t, dir, "--db", db, "fork", sid, "--at", "5"); code != 0 {
		t.Fatalf("fork: exit %d\n%s\n%s", code, o, e)
	}
	if o, e, code := stepwise(t, dir, "--db", db, "eval", "score", "session", sid, "0.8", "--name", "quality"); code != 0 {
		t.Fatalf("eval score: exit %d\n%s\n%s", code, o, e)
	}
	o, e, code := stepwise(t, dir, "--db", db, "run", "--agent", hitlAgent(t), "--input", "compute")
	if code != 3 {
		t.Fatalf("hitl run: exit %d, want 3 (waiting)\n%s\n%s", code, o, e)
	}
	m := regexp.MustCompile(`stepwise input (\S+) (\S+) `).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("no pending request in\n%s", o)
	}
	return m[1], m[2]
}

func hitlAgent(t *testing.T) string {
	a, err := filepath.Abs("testdata/hitl/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func firstSession(t *testing.T, dir, db string) string {
	t.Helper()
	var page struct{ Sessions []*steptype.Session }
	o, _, _ := stepwise(t, dir, "--db", db, "sessions", "--json")
	if err := json.Unmarshal([]byte(o), &page); err != nil || len(page.Sessions) == 0 {
		t.Fatalf("sessions --json: %v\n%s", err, o)
	}
	return page.Sessions[len(page.Sessions)-1].ID
}

// dump is what a database shows through the CLI: every session row and
// every session's steps, as JSON.
func dump(t *testing.T, dir, db string) string {
	t.Helper()
	o, e, code := stepwise(t, dir, "--db", db, "sessions", "--json", "--limit", "1000")
	if code != 0 {
		t.Fatalf("sessions: %s", e)
	}
	var page struct{ Sessions []*steptype.Session }
	if err := json.Unmarshal([]byte(o), &page); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(o)
	for _, s := range page.Sessions {
		so, se, code := stepwise(t, dir, "--db", db, "steps", s.ID, "--json")
		if code != 0 {
			t.Fatalf("steps %s: %s", s.ID, se)
		}
		b.WriteString(so)
	}
	return b.String()
}

var verifiedLine = regexp.MustCompile(`(?m)^verified (\S+) steps=(\d+) .* sha256=[0-9a-f]{64} ok$`)

// copyAndCheck copies src into dst through the binary and checks the
// verification it prints and what the destination shows.
func copyAndCheck(t *testing.T, dir, src, dst string) {
	t.Helper()
	o, e, code := stepwise(t, dir, "copy", "--from", src, "--to", dst)
	if code != 0 {
		t.Fatalf("copy: exit %d\n%s\n%s", code, o, e)
	}
	if n := len(verifiedLine.FindAllString(o, -1)); n != 3 || !strings.Contains(o, "copied 3 sessions, 18 steps") {
		t.Fatalf("copy printed %d verified sessions:\n%s", n, o)
	}
	if !strings.Contains(e, "100.0%") {
		t.Errorf("no progress on stderr:\n%s", e)
	}
	if got, want := dump(t, dir, dst), dump(t, dir, src); got != want {
		t.Fatalf("destination differs from source:\n got %s\nwant %s", got, want)
	}
	if o, _, _ := stepwise(t, dir, "--db", dst, "eval", "list", "session", firstSession(t, dir, src)); !strings.Contains(o, `"quality"`) {
		t.Errorf("eval not copied:\n%s", o)
	}
	if o, _, _ := stepwise(t, dir, "--db", dst, "search", "population"); !strings.Contains(o, "lookup_population") {
		t.Errorf("vectors not copied: search on the destination finds\n%s", o)
	}
}

// answerOn answers the waiting run on db from a new process and checks it
// completes there.
func answerOn(t *testing.T, dir, db, run, req string) {
	t.Helper()
	o, e, code := stepwise(t, dir, "--db", db, "input", run, req, "yes, go ahead", "--resume", "--agent", hitlAgent(t))
	if code != 0 || !strings.Contains(o, "completed") {
		t.Fatalf("answer on %s: exit %d\n%s\n%s", db, code, o, e)
	}
}

// TestCopySQLiteToSQLite copies a demo database, answers its waiting run
// on the copy, and then copies again: the destination now holds other
// data under the same ids, which is refused without writing anything.
func TestCopySQLiteToSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run, req := demoDB(t, dir, "sqlite:src.db")
	copyAndCheck(t, dir, "sqlite:src.db", "sqlite:dst.db")
	if _, err := os.Stat(filepath.Join(dir, "dst.db.copy-checkpoint")); !os.IsNotExist(err) {
		t.Errorf("checkpoint left after a finished copy: %v", err)
	}
	// Copying again is idempotent.
	if o, e, code := stepwise(t, dir, "copy", "--from", "sqlite:src.db", "--to", "sqlite:dst.db", "--quiet"); code != 0 {
		t.Fatalf("second copy: exit %d\n%s\n%s", code, o, e)
	}
	answerOn(t, dir, "sqlite:dst.db", run, req)
	if o, _, _ := stepwise(t, dir, "--db", "sqlite:src.db", "inputs"); !strings.Contains(o, req) {
		t.Errorf("the source's run should still wait:\n%s", o)
	}
	before := dump(t, dir, "sqlite:dst.db")
	_, e, code := stepwise(t, dir, "copy", "--from", "sqlite:src.db", "--to", "sqlite:dst.db")
	if code != 1 || !strings.Contains(e, "different data") {
		t.Fatalf("copy over changed data: exit %d\n%s", code, e)
	}
	if dump(t, dir, "sqlite:dst.db") != before {
		t.Error("a refused copy changed the destination")
	}
}

// TestCopySQLiteToPostgres copies the demo database into PostgreSQL, and
// from there into a new SQLite file (PostgreSQL as the source), then
// answers the waiting run on PostgreSQL.
func TestCopySQLiteToPostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pg := postgresSchemaDSN(t)
	run, req := demoDB(t, dir, "sqlite:src.db")
	copyAndCheck(t, dir, "sqlite:src.db", pg)
	copyAndCheck(t, dir, pg, "sqlite:back.db")
	if got, want := dump(t, dir, "sqlite:back.db"), dump(t, dir, "sqlite:src.db"); got != want {
		t.Fatalf("SQLite → PostgreSQL → SQLite differs:\n got %s\nwant %s", got, want)
	}
	answerOn(t, dir, pg, run, req)
}

// genDB writes a database of n sessions of k steps each, every session
// with a finished run, through the Go API.
func genDB(t *testing.T, path string, n, k int) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range n {
		sid := fmt.Sprintf("s%05d", i)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "gen"}); err != nil {
			t.Fatal(err)
		}
		var steps []*steptype.Step
		for j := range k {
			steps = append(steps, &steptype.Step{ID: fmt.Sprintf("%s-%d", sid, j), SessionID: sid, RunID: "r" + sid,
				Kind: steptype.KindLLM, Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
				Content: strings.Repeat("lorem ipsum ", 20)})
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
			t.Fatal(err)
		}
		r := &steptype.Run{ID: "r" + sid, SessionID: sid, Agent: "gen", Status: steptype.RunCompleted}
		if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: r}); err != nil {
			t.Fatal(err)
		}
	}
}
