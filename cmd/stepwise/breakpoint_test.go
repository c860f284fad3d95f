package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

var continueLine = regexp.MustCompile(`go on with: stepwise continue (\S+)`)

// TestBreakpointsThroughBinary pauses a run from the command line and
// from its agent file, steps once with a state edit, and continues to
// the end, each from a new process.
func TestBreakpointsThroughBinary(t *testing.T) {
	t.Parallel()
	agent, _ := filepath.Abs("testdata/breakpoints/agent.yaml")
	dir := t.TempDir()
	db := filepath.Join(dir, "bp.db")
	sw := func(args ...string) (string, string, int) {
		return stepwise(t, dir, append([]string{"--db", "sqlite:" + db}, args...)...)
	}
	o, e, code := sw("run", "--agent", agent, "--input", "6*7?", "--break-before", "llm")
	m := continueLine.FindStringSubmatch(o)
	if code != 3 || m == nil || !strings.Contains(o, `paused before step "llm" (breakpoint "llm")`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, o, e)
	}
	session := m[1]
	if o, _, _ := sw("inputs"); !strings.Contains(o, "breakpoint") {
		t.Fatalf("inputs:\n%s", o)
	}
	// A bad answer is refused and changes nothing.
	if _, e, code := sw("continue", session, "--state", "[1]", "--agent", agent); code != 2 || !strings.Contains(e, "JSON object") {
		t.Fatalf("bad state: exit %d %s", code, e)
	}
	o, e, code = sw("continue", session, "--step", "--state", `{"checked":true}`, "--agent", agent)
	if code != 3 || !strings.Contains(o, "state edited at a breakpoint") || !strings.Contains(o, `paused before step "tools" (breakpoint "step")`) {
		t.Fatalf("step: exit %d\n%s\n%s", code, o, e)
	}
	// The agent file's breakpoint: after the calculator ran.
	o, e, code = sw("continue", session, "--agent", agent)
	if code != 3 || !strings.Contains(o, `paused after step "tools" (breakpoint "tool:calculator")`) {
		t.Fatalf("continue: exit %d\n%s\n%s", code, o, e)
	}
	o, e, code = sw("continue", session, "--agent", agent)
	if code != 0 || !strings.Contains(o, "The answer is 42.") || !strings.Contains(o, "completed") {
		t.Fatalf("last continue: exit %d\n%s\n%s", code, o, e)
	}
	if _, e, code := sw("continue", session, "--agent", agent); code != 1 || !strings.Contains(e, "not paused") {
		t.Fatalf("continue a finished run: exit %d %s", code, e)
	}
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.RunList(context.Background(), &store.RunListParams{SessionID: session})
	if err != nil || len(runs) != 1 || string(runs[0].State) != `{"checked":true}` {
		t.Fatalf("runs %v %+v", err, runs)
	}
}

// TestBreakpointOverMCP: an MCP client (the official TypeScript one) sees
// a breakpoint's pause in inputs_list and answers it with input_answer.
func TestBreakpointOverMCP(t *testing.T) {
	t.Parallel()
	node := mcpNode(t)
	agent, _ := filepath.Abs("testdata/breakpoints/agent.yaml")
	db := filepath.Join(t.TempDir(), "mcp.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "breakpoint.mjs", bin, "--db", "sqlite:"+db, "mcp", "--agent", agent)
	cmd.Dir = mcpDeps
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("breakpoint.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	var seen struct {
		Breakpoint struct{ When, Step, Matched string }
		Output     string
		State      map[string]any
	}
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if bp := seen.Breakpoint; bp.When != "after" || bp.Step != "tools" || bp.Matched != "tool:calculator" || seen.Output != "The answer is 42." || seen.State["via"] != "mcp" {
		t.Fatalf("saw %+v", seen)
	}
}
