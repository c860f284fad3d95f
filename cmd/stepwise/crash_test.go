package main_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

var runLine = regexp.MustCompile(`session (\S+)\s+run (\S+)`)

// diff lists the lines that differ.
func diff(got, want []string) string {
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, "- %s\n+ %s\n", w, g)
		}
	}
	return b.String()
}

// transcript is the comparable content of a session: everything but ids,
// times and metrics.
func transcript(t *testing.T, db, session string) []string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	steps, err := st.StepList(context.Background(), &store.StepListParams{SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for i, s := range steps {
		if s.Sequence != int64(i+1) {
			t.Fatalf("sequence gap: step %d has sequence %d", i+1, s.Sequence)
		}
		if seen[s.ID] {
			t.Fatalf("duplicate step id %s", s.ID)
		}
		seen[s.ID] = true
		var calls []string
		for _, c := range s.ToolCalls {
			calls = append(calls, c.ID+":"+c.Name+string(c.Arguments))
		}
		out = append(out, fmt.Sprintf("%s|%s|%s|%q|%s|%s|%s|%s", s.Kind, s.Name, s.Role, s.Content, strings.Join(calls, ","), s.ToolCallID, s.ToolName, s.Status))
	}
	// Parallel tool calls commit in completion order, which varies from run
	// to run: compare each batch of consecutive tool results sorted.
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && strings.HasPrefix(out[j], "tool|") {
			j++
		}
		if j > i {
			slices.Sort(out[i:j])
			i = j
		} else {
			i++
		}
	}
	return out
}

// TestCrashSafety SIGKILLs the real binary at random moments of a
// multi-step run on a SQLite file, resumes it with `stepwise resume`, and
// checks after every kill that committed steps are intact, gap-free and not
// duplicated, and at the end that the run completed with the transcript of
// an uninterrupted run.
func TestCrashSafety(t *testing.T) {
	agent, _ := filepath.Abs("testdata/crash/agent.yaml")
	dir := t.TempDir()

	// The reference: an uninterrupted run.
	refDB := filepath.Join(dir, "ref.db")
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:"+refDB, "run", "--agent", agent, "--input", "go")
	if code != 0 {
		t.Fatalf("reference run: exit %d\n%s\n%s", code, out, errOut)
	}
	m := runLine.FindStringSubmatch(out)
	want := transcript(t, refDB, m[1])
	if len(want) < 30 {
		t.Fatalf("reference transcript too short: %d steps", len(want))
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills, rounds := 0, 0
	for kills < 60 {
		rounds++
		db := filepath.Join(dir, fmt.Sprintf("crash-%d.db", rounds))
		args := []string{"--db", "sqlite:" + db, "run", "--agent", agent, "--input", "go"}
		var session, run string
		for attempt := 0; ; attempt++ {
			if attempt > 200 {
				t.Fatal("run never completed")
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 1024)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			if session == "" {
				select {
				case l := <-lines:
					mm := runLine.FindStringSubmatch(l)
					if mm == nil {
						t.Fatalf("unexpected first line %q", l)
					}
					session, run = mm[1], mm[2]
				case <-time.After(30 * time.Second):
					t.Fatal("no run line")
				}
				args = []string{"--db", "sqlite:" + db, "resume", run, "--agent", agent}
			}
			done := make(chan error, 1)
			go func() {
				for range lines {
				}
				done <- cmd.Wait()
			}()
			delay := time.Duration(rng.IntN(250)+10) * time.Millisecond
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("process failed: %v", err)
				}
			case <-time.After(delay):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				kills++
				transcript(t, db, session) // intact, gap-free, no duplicates
				continue
			}
			break
		}
		got := transcript(t, db, session)
		if d := diff(got, want); d != "" {
			t.Fatalf("round %d (after %d kills): transcript differs from the uninterrupted run:\n%s", rounds, kills, d)
		}
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.RunGet(context.Background(), &store.RunGetParams{ID: run})
		st.Close()
		if err != nil || r.Status != steptype.RunCompleted {
			t.Fatalf("round %d: run %v %+v", rounds, err, r)
		}
	}
	t.Logf("%d kills over %d runs; every run completed with the reference transcript (%d steps)", kills, rounds, len(want))
}
