package agentload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// tally is a Go tool whose result updates the run state.
type tally struct{}

func (tally) Definition() llm.ToolDef {
	return llm.ToolDef{Name: "tally", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (tally) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	return &tool.Result{Content: "ok", State: json.RawMessage(`{"n":1,"seen":["` + c.ID + `"]}`)}, nil
}

// TestFileReducersAndUpdatePolicy: reducers, on_update and step_map of an
// agent file reach the engine; four parallel calls updating the same keys
// through the file's reducers lose nothing.
func TestFileReducersAndUpdatePolicy(t *testing.T) {
	dir := t.TempDir()
	script := "turns:\n  - tool_calls: [{name: tally, id: a}, {name: tally, id: b}, {name: tally, id: c}, {name: tally, id: d}]\n  - text: counted\n"
	agent := "name: counter\nmodel: scripted:s.yaml\nreducers: {n: sum, seen: append}\non_update: fail\nstep_map: {old: llm}\n"
	for name, body := range map[string]string{"s.yaml": script, "a.yaml": agent} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := agentload.Load(context.Background(), filepath.Join(dir, "a.yaml"), agentload.Options{Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := l.Agent
	if a.OnUpdate != stepwise.UpdateFail || a.StepMap["old"] != "llm" || fmt.Sprint(a.Reducers["n"]) != "sum" || fmt.Sprint(a.Reducers["seen"]) != "append" {
		t.Fatalf("agent %+v", a)
	}
	a.Tools = append(a.Tools, tally{})
	e, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "counter", Input: "count"}))
	if err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, run)
	}
	var st struct {
		N    int      `json:"n"`
		Seen []string `json:"seen"`
	}
	if err := json.Unmarshal(run.State, &st); err != nil || st.N != 4 || len(st.Seen) != 4 {
		t.Fatalf("state %s", run.State)
	}
}
