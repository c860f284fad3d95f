package stepwise_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// finder is a tool that reports what it found as a state update; calls run
// in parallel and finish in random order.
type finder struct {
	rnd *rand.Rand
	mu  sync.Mutex
}

func (f *finder) Definition() llm.ToolDef {
	return llm.ToolDef{Name: "find", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (f *finder) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	var a struct{ Item string }
	_ = json.Unmarshal(c.Arguments, &a)
	f.mu.Lock()
	d := time.Duration(f.rnd.IntN(3)) * time.Millisecond
	f.mu.Unlock()
	time.Sleep(d) // vary the completion order, not a synchronisation
	st, _ := json.Marshal(map[string]any{"found": []string{a.Item}, "count": 1, "last": a.Item, "meta": map[string]string{a.Item: "seen"}})
	return &tool.Result{Content: "found " + a.Item, State: st}, nil
}

func TestReducersWithParallelTools(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	items := []string{"a", "b", "c", "d", "e", "f"}
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if assistantTurns(req) == 0 {
			var calls []stepwise.ToolCall
			for i, it := range items {
				calls = append(calls, call(fmt.Sprint("c", i), "find", `{"item":"`+it+`"}`))
			}
			return &llm.Response{ToolCalls: calls}, nil
		}
		return &llm.Response{Content: "done"}, nil
	}}
	mk := func(name string, reducers map[string]stepwise.Reducer) *stepwise.Agent {
		return &stepwise.Agent{Name: name, Model: m, Tools: []tool.Tool{&finder{rnd: rand.New(rand.NewPCG(uint64(seed), 1))}},
			Limits: stepwise.Limits{MaxParallelTools: 6}, Reducers: reducers,
			// A state update from a custom step goes through the same reducers.
			StartStep: "init", Steps: map[string]stepwise.Handler{"init": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
				return &stepwise.Next{Step: stepwise.StepLLM, State: map[string]any{"found": []string{"seed"}, "count": 10, "meta": map[string]string{"x": "y"}}}, nil
			})}}
	}
	longest := stepwise.ReducerFunc(func(cur, upd json.RawMessage) (json.RawMessage, error) {
		if len(upd) > len(cur) {
			return upd, nil
		}
		return cur, nil
	})
	reduced := mk("reduced", map[string]stepwise.Reducer{"found": stepwise.ReduceAppend, "count": stepwise.ReduceSum, "meta": stepwise.ReduceMerge, "last": longest})
	plain := mk("plain", nil)
	e, st := newEngine(t, reduced, plain)
	ctx := context.Background()
	state := func(agent string) (map[string]any, *stepwise.Run) {
		run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: agent, Input: "find all"}))
		if err != nil || run.Status != steptype.RunCompleted {
			t.Fatalf("%v %+v", err, run)
		}
		var out map[string]any
		if err := json.Unmarshal(run.State, &out); err != nil {
			t.Fatal(err)
		}
		return out, run
	}
	got, run := state("reduced")
	found := fmt.Sprint(got["found"])
	for _, it := range items {
		if !strings.Contains(found, it) {
			t.Fatalf("append lost %q: %v", it, found)
		}
	}
	if len(got["found"].([]any)) != 7 || got["count"] != float64(16) || len(got["meta"].(map[string]any)) != 7 {
		t.Fatalf("reduced state %v", got)
	}
	// Replaying the recorded patches in order gives the run's state: the
	// step log records each reducer's result as a merge patch.
	var replayed json.RawMessage
	for _, s := range steps(t, st, run.SessionID) {
		if len(s.StatePatch) > 0 {
			var err error
			if replayed, err = stepwise.MergePatch(replayed, s.StatePatch); err != nil {
				t.Fatal(err)
			}
		}
	}
	var r map[string]any
	_ = json.Unmarshal(replayed, &r)
	if fmt.Sprint(r) != fmt.Sprint(got) {
		t.Fatalf("patches replay to %v, state is %v", r, got)
	}
	// Without reducers the last commit wins: the lost updates the reducers prevent.
	p, _ := state("plain")
	if len(p["found"].([]any)) != 1 || p["count"] != float64(1) {
		t.Fatalf("merge-patch state %v", p)
	}
}

func TestReducerErrorsAndReplace(t *testing.T) {
	t.Parallel()
	step := func(state any, next string) stepwise.Handler {
		return stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			return &stepwise.Next{Step: next, State: state}, nil
		})
	}
	a := &stepwise.Agent{Name: "rep", StartStep: "one", Reducers: map[string]stepwise.Reducer{"cfg": stepwise.ReduceReplace, "n": stepwise.ReduceSum},
		Steps: map[string]stepwise.Handler{
			"one": step(map[string]any{"cfg": map[string]any{"a": 1, "b": 2}, "n": 1.5}, "two"),
			"two": step(map[string]any{"cfg": map[string]any{"c": 3}, "n": 2}, "bad"),
			"bad": step(map[string]any{"n": "x"}, stepwise.StepEnd),
		}}
	e, st := newEngine(t, a)
	ctx := context.Background()
	run, _ := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "rep", Input: "x"}))
	if run.Status != steptype.RunFailed || !strings.Contains(run.Error.Message, `state key "n": sum: the update is not a number`) {
		t.Fatalf("run %s %+v", run.Status, run.Error)
	}
	if string(run.State) != `{"cfg":{"c":3},"n":3.5}` {
		t.Fatalf("state %s", run.State)
	}
	for _, s := range steps(t, st, run.SessionID) {
		if s.Name == "two" && string(s.StatePatch) != `{"cfg":{"a":null,"b":null,"c":3},"n":3.5}` {
			t.Fatalf("recorded patch %s", s.StatePatch)
		}
	}
}
