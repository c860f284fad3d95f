package main_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
)

// TestRetryInsideParallelCall: `stepwise retry --from K` at the second
// result of the demo's three parallel tool calls re-runs the two calls
// without a result and completes on the demo's strict scripted model (a
// request with a call missing its result would fail the run).
func TestRetryInsideParallelCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, errOut, code := stepwise(t, dir, "demo", "--no-serve", "--fast")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	sid := runLine.FindStringSubmatch(out)[1]
	out, _, code = stepwise(t, dir, "steps", sid, "--json")
	if code != 0 {
		t.Fatalf("steps: exit %d", code)
	}
	var steps []steptype.Step
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s steptype.Step
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("step line %q: %v", line, err)
		}
		steps = append(steps, s)
	}
	// The first model step with three calls, and the sequence of its
	// second result.
	var from int64
	var calls int
	for i, s := range steps {
		if s.Kind == steptype.KindLLM && len(s.ToolCalls) == 3 {
			calls = 3
			for _, r := range steps[i+1:] {
				if r.Kind == steptype.KindTool && r.Hop == 0 {
					if calls--; calls == 1 {
						from = r.Sequence
						break
					}
				}
			}
			break
		}
	}
	if from == 0 {
		t.Fatalf("no parallel call in the demo session")
	}
	out, errOut, code = stepwise(t, dir, "retry", sid, "--from", strconv.FormatInt(from, 10))
	if code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("retry --from %d: exit %d\n%s\n%s", from, code, out, errOut)
	}
	fork := runLine.FindStringSubmatch(out)[1]
	out, _, _ = stepwise(t, dir, "steps", fork, "--json", "--from", strconv.FormatInt(from, 10))
	var redone []steptype.Step
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s steptype.Step
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("step line %q: %v", line, err)
		}
		redone = append(redone, s)
	}
	tools := 0
	var kinds []string
	for _, s := range redone {
		kinds = append(kinds, string(s.Kind))
	}
	for _, s := range redone {
		if s.Kind == steptype.KindLLM {
			break
		}
		if s.Kind == steptype.KindTool {
			tools++
		}
	}
	if tools != 2 {
		t.Fatalf("retry re-ran %d tool calls before the next model call, want 2: %v", tools, kinds)
	}
}
