package main_test

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestStepResourcesThroughBinary: the steps of a run record the CPU time
// they used (stepwise steps --json: metrics.cpu_time_ns), and none under
// STEPWISE_STEP_RESOURCES=off.
func TestStepResourcesThroughBinary(t *testing.T) {
	t.Parallel()
	agent, _ := filepath.Abs("testdata/hitl/agent.yaml")
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "res.db")
	cpu := func(env ...string) map[string]int64 {
		o, e, code := stepwiseEnv(t, dir, env, "--db", db, "run", "--agent", agent, "--input", "compute")
		m := runLine.FindStringSubmatch(o)
		if code != 3 || m == nil {
			t.Fatalf("run: exit %d\n%s\n%s", code, o, e)
		}
		o, e, code = stepwise(t, dir, "--db", db, "steps", m[1], "--json")
		if code != 0 {
			t.Fatalf("steps: exit %d %s", code, e)
		}
		out := map[string]int64{}
		sc := bufio.NewScanner(strings.NewReader(o))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var s struct {
				Kind    string `json:"kind"`
				Metrics struct {
					CPU int64 `json:"cpu_time_ns"`
				} `json:"metrics"`
			}
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			out[s.Kind] += s.Metrics.CPU
		}
		return out
	}
	if on := cpu(); on["llm"] <= 0 || on["user"] != 0 {
		t.Fatalf("cpu time by kind: %v; want some for llm, none for the user step", on)
	}
	if off := cpu("STEPWISE_STEP_RESOURCES=off"); off["llm"] != 0 {
		t.Fatalf("with STEPWISE_STEP_RESOURCES=off: %v", off)
	}
}
