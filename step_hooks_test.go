package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/memory"
)

func TestStepHooks(t *testing.T) {
	t.Parallel()
	var order []string
	double := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		var in struct{ N int }
		if err := s.DecodeInput(&in); err != nil {
			return nil, err
		}
		order = append(order, "handler")
		return &stepwise.Next{Step: "cached", Output: map[string]int{"n": in.N * 2}}, nil
	})
	never := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return nil, errors.New("short-circuited step ran")
	})
	a := &stepwise.Agent{
		Name: "hooked", StartStep: "double", Model: answer("model says hi"),
		Steps: map[string]stepwise.Handler{"double": double, "cached": never},
		Hooks: []stepwise.StepHook{
			{ // agent-wide: outermost, sees every step but tools
				Name: "audit",
				Before: func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
					order = append(order, "audit.before:"+s.StepName())
					return nil, nil
				},
				After: func(ctx context.Context, s *stepwise.Scope, n *stepwise.Next) (*stepwise.Next, error) {
					order = append(order, "audit.after:"+s.StepName())
					s.SetMetadata("audited", true)
					return n, nil
				},
			},
			{ // per step: prepares the input from the run and post-processes the output
				Name: "prepare", Steps: []string{"double"},
				Before: func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
					order = append(order, "prepare.before")
					return nil, s.SetInput(map[string]int{"N": len(s.Run().Input)})
				},
				After: func(ctx context.Context, s *stepwise.Scope, n *stepwise.Next) (*stepwise.Next, error) {
					order = append(order, "prepare.after")
					var out map[string]int
					_ = json.Unmarshal(mustJSON(n.Output), &out)
					n.Output = map[string]int{"n": out["n"], "plus_one": out["n"] + 1}
					n.State = map[string]int{"doubled": out["n"]}
					return n, nil
				},
			},
			{ // short-circuits a step: its handler never runs
				Name: "cache", Steps: []string{"cached"},
				Before: func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
					return &stepwise.Next{Step: stepwise.StepLLM, Content: "from cache"}, nil
				},
			},
			{ // post-processes the built-in llm step's record
				Name: "shout", Steps: []string{stepwise.StepLLM},
				After: func(ctx context.Context, s *stepwise.Scope, n *stepwise.Next) (*stepwise.Next, error) {
					s.Record().Content = strings.ToUpper(s.Record().Content)
					return n, nil
				},
			},
		},
	}
	e, st := newEngine(t, a)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "hooked", Input: "four"}))
	if err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, run)
	}
	if got := strings.Join(order, " "); got != "audit.before:double prepare.before handler prepare.after audit.after:double audit.before:cached audit.after:cached audit.before:llm audit.after:llm" {
		t.Fatalf("order: %s", got)
	}
	byName := map[string]*stepwise.Step{}
	for _, s := range steps(t, st, run.SessionID) {
		byName[s.Name] = s
	}
	d := byName["double"]
	if string(d.Inputs) != `{"N":4}` || string(d.Outputs) != `{"n":8,"plus_one":9}` || string(d.StatePatch) != `{"doubled":8}` {
		t.Fatalf("double step: in %s out %s patch %s", d.Inputs, d.Outputs, d.StatePatch)
	}
	if fmt.Sprint(d.Metadata["hooks"]) != "[audit.before prepare.before prepare.after audit.after]" || d.Metadata["audited"] != true {
		t.Fatalf("double metadata %v", d.Metadata)
	}
	c := byName["cached"]
	if c.Content != "from cache" || fmt.Sprint(c.Metadata["hooks"]) != "[audit.before cache.before cache.short_circuit audit.after]" {
		t.Fatalf("cached step %q %v", c.Content, c.Metadata)
	}
	l := byName["llm"]
	if l.Content != "MODEL SAYS HI" || run.Output != "MODEL SAYS HI" || fmt.Sprint(l.Metadata["hooks"]) != "[audit.before shout.after audit.after]" {
		t.Fatalf("llm step %q (run output %q) %v", l.Content, run.Output, l.Metadata)
	}
}

func TestStepHookErrorFailsTheAttempt(t *testing.T) {
	t.Parallel()
	calls := 0
	a := &stepwise.Agent{
		Name: "flaky-hook", Model: answer("ok"), Retry: stepwise.RetryPolicy{MaxAttempts: 2, InitialInterval: 1, MaxInterval: 1},
		Hooks: []stepwise.StepHook{{Name: "gate", Before: func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			if calls++; calls == 1 {
				return nil, &llm.Error{Class: steptype.ErrorTransient, StatusCode: 503, Code: "http_503", Message: "gate busy"}
			}
			return nil, nil
		}}},
	}
	e, st := newEngine(t, a)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "flaky-hook", Input: "x"}))
	if err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, run)
	}
	if got := strings.Join(kinds(steps(t, st, run.SessionID)), " "); got != "user error llm" {
		t.Fatalf("steps %s", got)
	}
}

func TestStepHookUnknownStepRefused(t *testing.T) {
	t.Parallel()
	_, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{{Name: "x", Model: answer("a"),
		Hooks: []stepwise.StepHook{{Name: "h", Steps: []string{"nope"}}}}}})
	if err == nil || !strings.Contains(err.Error(), `hook "h": step "nope" is not defined`) {
		t.Fatalf("err %v", err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
