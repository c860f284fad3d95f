package main_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIHygiene: usage errors exit 2 whatever refuses them (cobra or the
// command); messages carry "stepwise:" once; run --json keeps stdout to JSON
// lines while the hint (with --agent FILE) goes to stderr; a blank token is
// refused before serve prints anything.
func TestCLIHygiene(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"sessions", "--bogus"}, {"steps"}, {"steps", "a", "b"}, {"nosuch"}, {"run"}, {"eval", "judge"},
		{"metrics", "--bucket", "week"}, {"serve", "--token", " ", "--addr", "127.0.0.1:0"},
	} {
		out, errOut, code := stepwise(t, dir, append([]string{"--db", "memory:"}, args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "stepwise: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, nothing on stdout, a message", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"steps", "nope"}, {"cancel", "nope"}, {"resume", "nope"}} {
		_, errOut, code := stepwise(t, dir, append([]string{"--db", "memory:"}, args...)...)
		if code != 1 || strings.Count(errOut, "stepwise:") != 1 || !strings.Contains(errOut, "not found") {
			t.Errorf("%v: exit %d %q; want 1 and one \"stepwise:\"", args, code, errOut)
		}
	}

	agent, _ := filepath.Abs("testdata/hitl/agent.yaml")
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:h.db", "run", "--agent", agent, "--input", "compute", "--json")
	if code != 3 {
		t.Fatalf("run --json of a waiting run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("run --json: stdout line is not JSON: %q", line)
		}
	}
	if !strings.Contains(errOut, "pending request") || !strings.Contains(errOut, "--resume --agent "+agent) {
		t.Errorf("run --json: hint on stderr %q lacks the request or --agent FILE", errOut)
	}
}
