package main_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

var runLine = regexp.MustCompile(`session (\S+)\s+run (\S+)`)

// toolsAsked matches the last printed step when tool calls are in flight:
// the model's step asking for them, or a calculator result (the calculator
// answers at once, http_get after a delay).
var toolsAsked = regexp.MustCompile(`^#\d+\s+(llm\s.*→|tool\s+tools\s+calculator)`)

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
	return storeTranscript(t, st, session)
}

// storeTranscript is transcript of a session of any store.
func storeTranscript(t *testing.T, st store.Store, session string) []string {
	t.Helper()
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

// crashAgent copies the crash agent (testdata/crash) into dir with an
// http_get call added to every turn that calls tools, served on loopback by
// a handler that answers after a delay, so that kills and signals land
// inside tool calls too. It returns the agent file's path.
func crashAgent(t *testing.T, dir string) string {
	return crashAgentWith(t, dir, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(100 * time.Millisecond): // latency of a real API
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "value of %s", r.URL.Path)
	})
}

// crashAgentWith is crashAgent with the given http_get handler.
func crashAgentWith(t *testing.T, dir string, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "crash", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	agent := read("agent.yaml")
	if !strings.Contains(agent, "tools: [calculator]") {
		t.Fatal("testdata/crash/agent.yaml: no `tools: [calculator]` line to extend")
	}
	agent = strings.Replace(agent, "tools: [calculator]", fmt.Sprintf("tools:\n  - calculator\n  - http_get: {allow_hosts: [%q]}", host), 1)
	turns := strings.Split(read("script.yaml"), "\n  - text: ")
	calls := 0
	for i, turn := range turns {
		if i == 0 || !strings.Contains(turn, "tool_calls:") {
			continue
		}
		end := strings.LastIndex(turn, "}}\n") + 3
		turns[i] = turn[:end] + fmt.Sprintf("      - {name: http_get, arguments: {url: \"http://%s/value/%d\"}}\n", host, calls) + turn[end:]
		calls++
	}
	if calls == 0 {
		t.Fatal("testdata/crash/script.yaml: no turn with tool calls")
	}
	for name, body := range map[string]string{"agent.yaml": agent, "script.yaml": strings.Join(turns, "\n  - text: ")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent.yaml")
}

// crashSeed is the seed of a random schedule: STEPWISE_CRASH_SEED replays one.
func crashSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("STEPWISE_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STEPWISE_CRASH_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with STEPWISE_CRASH_SEED=%d)", seed, seed)
	return seed
}

// TestCrashSafety interrupts the real binary at random moments of a
// multi-step run on a SQLite file — SIGKILL, or a graceful SIGTERM or
// SIGINT (Ctrl-C) — resumes it with `stepwise resume`, and checks after
// every interruption that committed steps are intact, gap-free and not
// duplicated (and, after a graceful stop, that the run was handed back, not
// left leased), and at the end that the run completed with the transcript of
// an uninterrupted run: a call cut off by a signal commits nothing and
// re-runs, it is never recorded as an error it did not have.
func TestCrashSafety(t *testing.T) {
	dir := t.TempDir()
	agent := crashAgent(t, dir)

	// The reference: an uninterrupted run.
	refDB := filepath.Join(dir, "ref.db")
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:"+refDB, "run", "--agent", agent, "--input", "go")
	if code != 0 {
		t.Fatalf("reference run: exit %d\n%s\n%s", code, out, errOut)
	}
	m := runLine.FindStringSubmatch(out)
	want := transcript(t, refDB, m[1])
	if len(want) < 40 {
		t.Fatalf("reference transcript too short: %d steps", len(want))
	}
	for _, l := range want {
		if strings.Contains(l, "error") {
			t.Fatalf("reference run recorded an error: %s", l)
		}
	}

	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	signals := []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT}
	sent := map[syscall.Signal]int{}
	kills, rounds, inTools := 0, 0, 0
	for kills < 90 {
		rounds++
		db := filepath.Join(dir, fmt.Sprintf("crash-%d.db", rounds))
		args := []string{"--db", "sqlite:" + db, "run", "--agent", agent, "--input", "go"}
		var session, run string
		for attempt := 0; ; attempt++ {
			if attempt > 500 {
				t.Fatal("run never completed")
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
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
			var last string // the last step printed, read after done
			go func() {
				for l := range lines {
					last = l
				}
				done <- cmd.Wait()
			}()
			delay := time.Duration(rng.IntN(400)+10) * time.Millisecond
			sig := signals[rng.IntN(len(signals))]
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("process failed: %v\n%s", err, stderr.String())
				}
			case <-time.After(delay):
				_ = cmd.Process.Signal(sig)
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("round %d: no exit 30s after %v", rounds, sig)
				}
				kills++
				sent[sig]++
				if sig != syscall.SIGKILL && toolsAsked.MatchString(last) {
					inTools++
				}
				transcript(t, db, session) // intact, gap-free, no duplicates
				if sig != syscall.SIGKILL {
					// The stopped process handed the run back (a lease of an
					// earlier, killed process may remain).
					if r := runRow(t, db, run); r.Status == steptype.RunRunning && strings.Contains(r.LeaseOwner, fmt.Sprintf("-%d-", cmd.Process.Pid)) {
						t.Fatalf("round %d: after %v the run is still running (lease %s), not handed back\n%s", rounds, sig, r.LeaseOwner, stderr.String())
					}
				}
				continue
			}
			break
		}
		got := transcript(t, db, session)
		if d := diff(got, want); d != "" {
			t.Fatalf("round %d (after %d interruptions, seed %d): transcript differs from the uninterrupted run:\n%s", rounds, kills, seed, d)
		}
		if r := runRow(t, db, run); r.Status != steptype.RunCompleted {
			t.Fatalf("round %d: run %+v", rounds, r)
		}
	}
	if inTools == 0 {
		t.Fatalf("no graceful stop landed while tool calls were in flight (seed %d): the schedule tested nothing of interest", seed)
	}
	t.Logf("%d interruptions (SIGKILL %d, SIGTERM %d, SIGINT %d; %d graceful ones with tool calls in flight) over %d runs, seed %d; every run completed with the reference transcript (%d steps)",
		kills, sent[syscall.SIGKILL], sent[syscall.SIGTERM], sent[syscall.SIGINT], inTools, rounds, seed, len(want))
}

// runRow reads a run from a SQLite file.
func runRow(t *testing.T, db, id string) *steptype.Run {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.RunGet(context.Background(), &store.RunGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
