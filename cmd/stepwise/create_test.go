package main_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// readOK runs a read-only command on db and fails on any error: a database
// with no data yet reads as empty, never as corrupt.
func readOK(t *testing.T, dir, db, what string) {
	t.Helper()
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:"+db, "sessions")
	low := strings.ToLower(out + errOut)
	for _, bad := range []string{"corrupt", "no such table", "readonly", "read-only database"} {
		if strings.Contains(low, bad) {
			code = -1
		}
	}
	if code != 0 {
		t.Fatalf("%s: stepwise sessions: exit %d\n%s\n%s", what, code, out, errOut)
	}
}

// TestHalfCreatedDatabase: read-only commands on a database whose creation
// was interrupted (crafted, and by SIGKILLs at random moments of a first
// run) answer "no data yet", and the next run creates the database.
func TestHalfCreatedDatabase(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	readOK(t, dir, empty, "empty file")
	half := filepath.Join(dir, "half.db")
	db, err := sql.Open("sqlite", half)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE stepwise_schema (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')))`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	readOK(t, dir, half, "version table only")

	agent, _ := filepath.Abs("testdata/crash/agent.yaml")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 12))
	for round := range 20 {
		path := filepath.Join(dir, fmt.Sprintf("kill-%d.db", round))
		cmd := exec.Command(bin, "--db", "sqlite:"+path, "run", "--agent", agent, "--input", "go")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.IntN(60_000)) * time.Microsecond
		time.Sleep(delay) // the random moment of the kill, not a synchronisation
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if _, err := os.Stat(path); err != nil {
			continue // killed before the file existed: nothing to read
		}
		readOK(t, dir, path, fmt.Sprintf("round %d, killed after %v", round, delay))
	}
	// A run on a half-created database creates it.
	if out, errOut, code := stepwise(t, dir, "--db", "sqlite:"+half, "run", "--agent", agent, "--input", "go"); code != 0 {
		t.Fatalf("run on the half-created database: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, _ := stepwise(t, dir, "--db", "sqlite:"+half, "sessions"); !strings.Contains(out, "crash") && strings.TrimSpace(out) == "" {
		t.Fatalf("no session listed after the run: %q", out)
	}
}
