package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/stepwise-run/stepwise/internal/attach"
)

// StepHook is middleware around the steps of an agent: before and after
// each step's execution. Before runs before the step's handler: it
// may read and change the step's input (Scope.Input, Scope.SetInput), and
// short-circuit the step by returning a non-nil Next, in which case the
// handler does not run. After runs when the handler (or a short-circuit)
// returned: it may change the Next (routing, state patch, output, content,
// annotations) and the record being built (Scope.SetMetadata; for the llm
// step, Scope.Record). An error from either fails the attempt like a
// handler error (retried when transient).
//
// What hooks change is committed with the step: its inputs, outputs, state
// patch, content, and Metadata["hooks"], the names of the hooks that ran
// ("name.before", "name.after", "name.short_circuit").
type StepHook struct {
	// Name identifies the hook in the step record. Required.
	Name string
	// Steps are the step names the hook applies to; empty means every
	// step of the agent except the built-in "tools" step, whose calls
	// commit themselves.
	Steps []string
	// Before runs before the handler; nil skips.
	Before func(ctx context.Context, s *Scope) (*Next, error)
	// After runs after the handler; nil skips. It returns the Next to use
	// (next itself, changed or not, or a replacement).
	After func(ctx context.Context, s *Scope, next *Next) (*Next, error)
}

// applies reports whether h runs around step name.
func (h *StepHook) applies(name string) bool {
	if len(h.Steps) == 0 {
		return name != StepTools
	}
	return slices.Contains(h.Steps, name)
}

// hooked wraps the handler of step name with the agent's hooks: Before in
// declaration order, After in reverse order (the first hook is outermost).
// hooks reports whether a hook of the agent applies to step name.
func (x *execution) hooks(name string) bool {
	for i := range x.agent.Hooks {
		if x.agent.Hooks[i].applies(name) {
			return true
		}
	}
	return false
}

func (x *execution) hooked(name string, h Handler) Handler {
	var hooks []*StepHook
	for i := range x.agent.Hooks {
		if x.agent.Hooks[i].applies(name) {
			hooks = append(hooks, &x.agent.Hooks[i])
		}
	}
	if len(hooks) == 0 {
		return h
	}
	return StepFunc(func(ctx context.Context, s *Scope) (*Next, error) {
		ran := 0 // hooks whose Before ran (and whose After must run)
		var next *Next
		for _, hk := range hooks {
			ran++
			if hk.Before == nil {
				continue
			}
			n, err := hk.Before(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("hook %s before %s: %w", hk.Name, name, err)
			}
			s.hookTrail = append(s.hookTrail, hk.Name+".before")
			if n != nil {
				s.hookTrail = append(s.hookTrail, hk.Name+".short_circuit")
				next = n
				break
			}
		}
		if next == nil {
			var err error
			if next, err = h.HandleStep(ctx, s); err != nil {
				return nil, err
			}
		}
		for i := ran - 1; i >= 0; i-- {
			hk := hooks[i]
			if hk.After == nil || next == nil {
				continue
			}
			n, err := hk.After(ctx, s, next)
			if err != nil {
				return nil, fmt.Errorf("hook %s after %s: %w", hk.Name, name, err)
			}
			s.hookTrail = append(s.hookTrail, hk.Name+".after")
			if n != nil {
				if n != next && next.record != nil && n.record == nil {
					n.record, n.committed = next.record, next.committed
				}
				next = n
			}
		}
		return next, nil
	})
}

// Input returns the step's input: what a before hook set with SetInput,
// else nil. A custom handler reads it to take what hooks prepared; it is
// recorded as the step's inputs.
func (s *Scope) Input() json.RawMessage { return s.step.Inputs }

// SetInput sets the step's input (any JSON value), recorded as the
// committed step's inputs.
func (s *Scope) SetInput(v any) error {
	raw, err := toRaw(v)
	if err != nil {
		return fmt.Errorf("stepwise: step input: %w", err)
	}
	s.step.Inputs = raw
	return nil
}

// DecodeInput unmarshals the step's input into v; a missing input leaves v.
func (s *Scope) DecodeInput(v any) error {
	if len(s.step.Inputs) == 0 {
		return nil
	}
	if err := json.Unmarshal(s.step.Inputs, v); err != nil {
		return fmt.Errorf("stepwise: decode step input: %w", err)
	}
	return nil
}

// SetMetadata sets a metadata key of the step being built.
func (s *Scope) SetMetadata(key string, v any) {
	if s.step.Metadata == nil {
		s.step.Metadata = map[string]any{}
	}
	s.step.Metadata[key] = v
}

// Record returns the step record being built, for after hooks that
// post-process a built-in step's result (e.g. the content of an llm step)
// before it is committed. Identity fields are set by the engine.
func (s *Scope) Record() *Step { return s.step }

// OnCommit registers fn to be called with each step this engine commits
// while executing runs (user, llm, tool, agent, input, decision, custom and
// error steps), after the commit is durable and in commit order per session.
//
// fn runs on the executing goroutine, inside the session's commit lock: it
// must return quickly and never block (hand the step to a channel without
// waiting, as recall.Worker does), and it must not modify the step. Steps
// written outside an execution (ingest, edited forks, answers to input
// requests) are not reported; a consumer that needs every step also scans
// the store. Registering is safe at any time, concurrently with runs.
func (e *Engine) OnCommit(fn func(*Step)) {
	if fn == nil {
		return
	}
	e.hooksMu.Lock()
	e.hooks = append(e.hooks, fn)
	e.hooksMu.Unlock()
}

// runCommitHooks calls the OnCommit callbacks with committed steps.
func (e *Engine) runCommitHooks(steps []*Step) {
	e.hooksMu.RLock()
	fns := e.hooks
	e.hooksMu.RUnlock()
	for _, fn := range fns {
		for _, s := range steps {
			fn(s)
		}
	}
}

// afterCommit runs after steps of an execution are durable: it calls the
// commit hooks. (Other instances hear of the commit from the store, whose
// notification committed with it.)
func (e *Engine) afterCommit(steps []*Step) {
	attach.Add(e.store, e.now, steps)
	e.runCommitHooks(steps)
}
