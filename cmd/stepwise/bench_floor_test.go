package main_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// `stepwise bench --floor` measures, on the same SQLite file and in the
// same process, the raw transaction of one step and reports the engine's
// ratio to it, in wall and CPU time, with allocations per step.
func TestBenchFloor(t *testing.T) {
	t.Parallel()
	out, errOut, code := stepwise(t, t.TempDir(), "bench", "--store", "memory,sqlite", "--steps", "200", "--floor", "--json")
	var res struct {
		Results []struct {
			Store      string  `json:"store"`
			PerStep    float64 `json:"per_step_us"`
			Allocs     float64 `json:"allocs_per_step"`
			CPUPerStep float64 `json:"cpu_per_step_us"`
			Floor      float64 `json:"floor_us"`
			Ratio      float64 `json:"ratio"`
			FloorCPU   float64 `json:"floor_cpu_us"`
			CPURatio   float64 `json:"cpu_ratio"`
		} `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Results) != 2 {
		t.Fatalf("bench --floor: exit %d\n%s\n%s", code, out, errOut)
	}
	mem, sq := res.Results[0], res.Results[1]
	if mem.Allocs <= 0 || mem.Floor != 0 {
		t.Errorf("memory: %+v", mem)
	}
	if sq.Store != "sqlite" || sq.Floor <= 0 || sq.Ratio <= 0 || sq.Allocs <= 0 || sq.CPUPerStep <= 0 || sq.FloorCPU <= 0 || sq.CPURatio <= 0 {
		t.Errorf("sqlite: %+v", sq)
	}
	out, _, code = stepwise(t, t.TempDir(), "bench", "--store", "sqlite", "--steps", "100", "--floor")
	if code != 0 || !strings.Contains(out, "engine/floor") {
		t.Errorf("text output: exit %d\n%s", code, out)
	}
	if _, errOut, code := stepwise(t, t.TempDir(), "bench", "--store", "memory", "--floor"); code == 0 || !strings.Contains(errOut, "--store sqlite") {
		t.Errorf("--floor without sqlite: exit %d %q", code, errOut)
	}
}

// `stepwise bench` runs with the collector's target of `stepwise serve`
// (loadgen.DefaultGCPercent) unless --gc-percent says otherwise, and
// reports the target it ran with.
func TestBenchGCPercent(t *testing.T) {
	t.Setenv("GOGC", "") // as if unset: the flag decides
	for _, tc := range []struct {
		args []string
		want int
	}{{nil, 400}, {[]string{"--gc-percent", "150"}, 150}} {
		args := append([]string{"bench", "--store", "memory", "--steps", "50", "--json"}, tc.args...)
		out, errOut, code := stepwise(t, t.TempDir(), args...)
		var res struct {
			Results []struct {
				GCPercent int `json:"gc_percent"`
			} `json:"results"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Results) != 1 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		if got := res.Results[0].GCPercent; got != tc.want {
			t.Errorf("%v: gc_percent %d, want %d", args, got, tc.want)
		}
	}
	out, errOut, code := stepwise(t, t.TempDir(), "bench", "--store", "memory", "--steps", "50")
	if code != 0 || !strings.Contains(out, "GC percent 400") {
		t.Errorf("text output: exit %d\n%s\n%s", code, out, errOut)
	}
}

// `stepwise bench --http` runs its subscribers in a client process of its
// own (this program again, --http-client) unless --in-process is given;
// every delta of every run is delivered either way.
func TestBenchHTTPClientProcess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		process bool
	}{{nil, true}, {[]string{"--in-process"}, false}} {
		args := append([]string{"bench", "--http", "--runs", "3", "--latency", "1ms", "--json"}, tc.args...)
		out, errOut, code := stepwise(t, t.TempDir(), args...)
		var res struct {
			HTTP struct {
				Runs          int   `json:"runs"`
				Steps         int64 `json:"steps"`
				Deltas        int64 `json:"deltas"`
				CPU           int64 `json:"cpu_per_event_ns"`
				ServerCPU     int64 `json:"server_cpu_per_event_ns"`
				ClientProcess bool  `json:"client_process"`
			} `json:"http"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		h := res.HTTP
		if h.Runs != 3 || h.Steps != 3*16 || h.Deltas != 3*80 || h.ClientProcess != tc.process || h.CPU <= 0 || (tc.process && (h.ServerCPU <= 0 || h.CPU <= h.ServerCPU)) || (!tc.process && h.ServerCPU != 0) {
			t.Errorf("%v: %+v", args, h)
		}
	}
	if _, errOut, code := stepwise(t, t.TempDir(), "bench", "--http-client"); code == 0 || !strings.Contains(errOut, "client process") {
		t.Errorf("--http-client by hand: exit %d %q", code, errOut)
	}
}
