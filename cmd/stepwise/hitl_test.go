package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

var pendingLine = regexp.MustCompile(`pending request (\S+): `)

// TestInputSurvivesKill runs an agent until it waits for input, SIGKILLs
// the process, answers from a new process, and checks the run completes
// with the same transcript as without the kill.
// resumedLine is the report of a resumed run: its steps, then this
// execution's.
var resumedLine = regexp.MustCompile(`completed — (\d+) steps; this execution: (\d+) steps`)

func TestInputSurvivesKill(t *testing.T) {
	t.Parallel()
	agent, _ := filepath.Abs("testdata/hitl/agent.yaml")
	dir := t.TempDir()
	flow := func(db string, kill bool) []string {
		cmd := exec.Command(bin, "--db", "sqlite:"+db, "run", "--agent", agent, "--input", "compute")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var session, run, req string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if m := runLine.FindStringSubmatch(l); m != nil {
				session, run = m[1], m[2]
			}
			if m := pendingLine.FindStringSubmatch(l); m != nil {
				req = m[1]
				if kill {
					_ = cmd.Process.Signal(syscall.SIGKILL)
				}
				break
			}
		}
		go func() {
			for sc.Scan() {
			}
		}()
		err = cmd.Wait()
		if kill {
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !ws.Signaled() && cmd.ProcessState.ExitCode() != 3 {
				t.Fatalf("first process: %v", err)
			}
		} else if cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("waiting run should exit 3, got %v", err)
		}
		if req == "" {
			t.Fatal("no pending request printed")
		}
		// The first process has exited: its lock on the database is gone.
		o, e, code := stepwise(t, dir, "--db", "sqlite:"+db, "input", run, req, "yes, go ahead", "--resume", "--agent", agent)
		if code != 0 || !strings.Contains(o, "completed") {
			t.Fatalf("answer from a new process: exit %d\n%s\n%s", code, o, e)
		}
		// The report counts the run's steps, not only this execution's.
		tr := transcript(t, db, session)
		if m := resumedLine.FindStringSubmatch(o); m == nil || m[1] != strconv.Itoa(len(tr)) || m[2] == m[1] {
			t.Fatalf("resumed run's report (want %d steps in all):\n%s", len(tr), o)
		}
		// Answering twice is refused and changes nothing.
		if _, e, code := stepwise(t, dir, "--db", "sqlite:"+db, "input", run, req, "again"); code != 1 || !strings.Contains(e, "already answered") {
			t.Fatalf("second answer: exit %d %q", code, e)
		}
		return transcript(t, db, session)
	}
	want := flow(filepath.Join(dir, "plain.db"), false)
	got := flow(filepath.Join(dir, "killed.db"), true)
	if d := diff(got, want); d != "" {
		t.Fatalf("transcript after kill differs:\n%s", d)
	}
	if !strings.Contains(strings.Join(got, "\n"), `input|tools|tool|"yes, go ahead"`) {
		t.Fatalf("answer not in transcript:\n%s", strings.Join(got, "\n"))
	}
}
