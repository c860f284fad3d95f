package stepwise_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// inPlaceStore records, per appended step kind, whether the engine handed
// the steps over (StepAppendParams.InPlace).
type inPlaceStore struct {
	store.Store
	mu   sync.Mutex
	seen map[steptype.Kind][]bool
}

func (s *inPlaceStore) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*stepwise.Step, error) {
	s.mu.Lock()
	for _, st := range p.Steps {
		s.seen[st.Kind] = append(s.seen[st.Kind], p.InPlace)
	}
	s.mu.Unlock()
	return s.Store.StepAppend(ctx, p)
}

// TestCommitHandsOverOwnSteps checks that the engine hands its own llm and
// tool steps over to the store (one copy fewer per step), and never a step
// user code could hold: with a hook on the llm step, which can keep
// Scope.Record, the llm steps are copied, and changing the kept record
// after the commit changes neither the store nor what subscribers got.
func TestCommitHandsOverOwnSteps(t *testing.T) {
	t.Parallel()
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	for _, hooked := range []bool{false, true} {
		st := &inPlaceStore{Store: memory.New(), seen: map[steptype.Kind][]bool{}}
		var kept []*stepwise.Step
		agent := &stepwise.Agent{Name: "a", Model: scripted.Loop("echo", `{"n":1}`, 3, "done"), Tools: []tool.Tool{echo}}
		if hooked {
			agent.Hooks = []stepwise.StepHook{{Name: "keep", Steps: []string{stepwise.StepLLM},
				After: func(ctx context.Context, s *stepwise.Scope, next *stepwise.Next) (*stepwise.Next, error) {
					kept = append(kept, s.Record())
					return next, nil
				}}}
		}
		e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
		if err != nil {
			t.Fatal(err)
		}
		var llmSteps []*stepwise.Step
		for ev, err := range e.Run(t.Context(), stepwise.StartParams{Agent: "a", Input: "go"}) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == stepwise.EventStepCompleted && ev.Step.Kind == steptype.KindLLM {
				llmSteps = append(llmSteps, ev.Step)
			}
		}
		want := map[steptype.Kind]bool{steptype.KindUser: false, steptype.KindLLM: !hooked, steptype.KindTool: true}
		for kind, w := range want {
			got := st.seen[kind]
			if len(got) == 0 {
				t.Fatalf("hooked=%v: no %s step appended", hooked, kind)
			}
			for i, g := range got {
				if g != w {
					t.Errorf("hooked=%v: %s step %d appended with InPlace %v, want %v", hooked, kind, i, g, w)
				}
			}
		}
		for i, r := range kept {
			r.Content = "changed by the hook after the commit"
			if llmSteps[i].Content == r.Content {
				t.Errorf("a record kept by a hook is the step subscribers got")
			}
			read, err := st.StepGet(t.Context(), &store.StepGetParams{ID: r.ID})
			if err != nil || read.Content == r.Content {
				t.Errorf("a record kept by a hook is the stored step: %v", err)
			}
		}
		if hooked && len(kept) == 0 {
			t.Fatal("the hook kept no record")
		}
		e.Close()
	}
}

// TestHookKeepsItsNext checks that a Next a hook sees is its own: the
// built-in steps reuse one only when no hook can keep it.
func TestHookKeepsItsNext(t *testing.T) {
	t.Parallel()
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	var kept []*stepwise.Next
	agent := &stepwise.Agent{Name: "a", Model: scripted.Loop("echo", `{"n":1}`, 3, "done"), Tools: []tool.Tool{echo},
		Hooks: []stepwise.StepHook{{Name: "keep", Steps: []string{stepwise.StepLLM, stepwise.StepTools},
			After: func(ctx context.Context, s *stepwise.Scope, next *stepwise.Next) (*stepwise.Next, error) {
				kept = append(kept, next)
				return next, nil
			}}}}
	e, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Wait(t.Context(), e.Run(t.Context(), stepwise.StartParams{Agent: "a", Input: "go"})); err != nil {
		t.Fatal(err)
	}
	if len(kept) < 6 {
		t.Fatalf("the hook saw %d steps", len(kept))
	}
	for i, n := range kept {
		for _, m := range kept[:i] {
			if n == m {
				t.Fatalf("step %d: a hook got the Next of an earlier step", i)
			}
		}
		if want := []string{stepwise.StepTools, ""}[i%2]; n.Step != want && i < len(kept)-1 {
			t.Errorf("kept Next %d routes to %q, want %q", i, n.Step, want)
		}
	}
}
