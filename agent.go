package stepwise

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/stepwise-run/stepwise/internal/answer"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/tool"
)

// Agent is a named definition: instructions, model, tools, sub-agents,
// custom steps, start step, limits and approval policy. An agent is a graph
// of named steps; the built-ins are "llm", "tools" and "end".
type Agent struct {
	// Name identifies the agent; [a-z0-9_-]+. Required.
	Name string
	// Description is shown to a parent agent when this agent is a sub-agent.
	Description string
	// Instructions are the system prompt of every model call.
	Instructions string
	// Model serves the "llm" step. Required unless no step routes to "llm".
	Model llm.Model
	// Tools the model may call.
	Tools []tool.Tool
	// SubAgents are offered to the model as tools; each call runs a child run.
	SubAgents []*Agent
	// Steps are custom step handlers by name. A name may override a
	// built-in ("llm", "tools") but not "end".
	Steps map[string]Handler
	// StartStep is the first step of a run. Default "llm".
	StartStep string
	// AfterLLM is where the "llm" step goes when the model asked for no
	// tool. Default "end".
	AfterLLM string
	// Limits bound a run.
	Limits Limits
	// Retry is the retry policy of model and tool calls.
	Retry RetryPolicy
	// Approvals names the tools whose calls need a human approval before
	// they run ("always" by default when listed).
	Approvals map[string]ApprovalPolicy
	// Context configures context building.
	Context ContextPolicy
	// Reducers say how updates of a run-state key combine (by top-level
	// key): ReduceReplace, ReduceAppend, ReduceMerge, ReduceSum or any
	// Reducer. Keys without one are merged (RFC 7386).
	Reducers map[string]Reducer
	// Version names this definition; empty means a content hash computed
	// at registration (see UpdateMode). Each run records the version it
	// started with.
	Version string
	// OnUpdate is what runs started on another version do when this
	// definition is loaded: UpdateContinue (default), UpdateRestart or
	// UpdateFail.
	OnUpdate UpdateMode
	// StepMap maps step names of older versions to steps of this one, for
	// runs whose cursor names a step that no longer exists.
	StepMap map[string]string
	// Hooks are step lifecycle middleware (before/after each step, or the
	// steps they name); see StepHook.
	Hooks []StepHook
	// Breakpoints pause every run of the agent before or after the steps
	// they select (see Breakpoints); StartParams.Breakpoints adds to them.
	Breakpoints *Breakpoints
	// Temperature and MaxTokens are passed to the model when set.
	Temperature *float64
	MaxTokens   int

	// budget is the context's token budget in force (see budgetOf), set
	// when the engine registers the agent (budgeted).
	budget   int
	budgeted bool
}

// Limits bound the work of a run. Zero values take the defaults.
type Limits struct {
	MaxSteps         int           // steps per run; default 1000
	StepTimeout      time.Duration // per step; default 10m
	RunTimeout       time.Duration // per execution of a run (waiting time excluded); default 0 = none
	MaxParallelTools int           // tool calls executed at once; default 8
	MaxDepth         int           // sub-agent nesting; default 4
}

// RetryPolicy retries transient failures of model and tool calls with
// exponential backoff and full jitter.
type RetryPolicy struct {
	MaxAttempts     int           // total attempts; default 3 (1 = no retry)
	InitialInterval time.Duration // default 500ms
	MaxInterval     time.Duration // default 30s
	Multiplier      float64       // default 2
}

// ApprovalPolicy says when a tool call needs a human approval.
type ApprovalPolicy string

// Approval policies.
const (
	ApproveAlways ApprovalPolicy = "always" // every call asks, unless allowed for the session
	ApproveNever  ApprovalPolicy = "never"  // calls run without asking
)

// ContextPolicy bounds the model context.
type ContextPolicy struct {
	// TokenBudget is the estimated token limit of the messages sent to the
	// model. When exceeded, the oldest turns are trimmed (or summarized)
	// and a system step records what was trimmed. Default (0): three
	// quarters of the model's context window (Config.ContextWindows, or
	// DefaultContextWindow for a model it does not know); NoTokenBudget
	// sends every message.
	TokenBudget int
	// Strategy is "trim" (default) or "summarize".
	Strategy string
}

var agentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// withDefaults returns a copy of a with defaults filled in.
func (a *Agent) withDefaults() *Agent {
	c := *a
	if c.StartStep == "" {
		c.StartStep = StepLLM
	}
	if c.AfterLLM == "" {
		c.AfterLLM = StepEnd
	}
	if c.OnUpdate == "" {
		c.OnUpdate = UpdateContinue
	}
	l := &c.Limits
	if l.MaxSteps == 0 {
		l.MaxSteps = 1000
	}
	if l.StepTimeout == 0 {
		l.StepTimeout = 10 * time.Minute
	}
	if l.MaxParallelTools == 0 {
		l.MaxParallelTools = 8
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = 4
	}
	r := &c.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 3
	}
	if r.InitialInterval == 0 {
		r.InitialInterval = 500 * time.Millisecond
	}
	if r.MaxInterval == 0 {
		r.MaxInterval = 30 * time.Second
	}
	if r.Multiplier == 0 {
		r.Multiplier = 2
	}
	return &c
}

// validate checks the agent definition (after defaults).
func (a *Agent) validate() error {
	var errs []error
	if !agentName.MatchString(a.Name) {
		errs = append(errs, fmt.Errorf("name %q must match %s", a.Name, agentName))
	}
	if _, ok := a.Steps[StepEnd]; ok {
		errs = append(errs, errors.New(`step "end" cannot be overridden`))
	}
	if !a.hasStep(a.StartStep) {
		errs = append(errs, fmt.Errorf("start step %q is not defined", a.StartStep))
	}
	if !a.hasStep(a.AfterLLM) {
		errs = append(errs, fmt.Errorf("after-llm step %q is not defined", a.AfterLLM))
	}
	if a.Model == nil && (a.StartStep == StepLLM || len(a.Steps) == 0) {
		if _, custom := a.Steps[StepLLM]; !custom {
			errs = append(errs, errors.New("model is required by the llm step"))
		}
	}
	if a.Limits.MaxSteps < 0 || a.Limits.MaxParallelTools < 0 || a.Limits.StepTimeout < 0 || a.Limits.RunTimeout < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if a.Retry.MaxAttempts < 1 {
		errs = append(errs, errors.New("retry.max_attempts must be at least 1"))
	}
	seen := map[string]bool{}
	for _, t := range a.Tools {
		n := t.Definition().Name
		if seen[n] {
			errs = append(errs, fmt.Errorf("duplicate tool %q", n))
		}
		seen[n] = true
	}
	for _, s := range a.SubAgents {
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("sub-agent %q collides with a tool of the same name", s.Name))
		}
		seen[s.Name] = true
	}
	for name, p := range a.Approvals {
		if p != ApproveAlways && p != ApproveNever {
			errs = append(errs, fmt.Errorf("approval policy of %q must be always or never", name))
		}
	}
	if !validUpdateMode(a.OnUpdate) {
		errs = append(errs, fmt.Errorf("on_update %q must be continue, restart or fail", a.OnUpdate))
	}
	for from, to := range a.StepMap {
		if !a.hasStep(to) {
			errs = append(errs, fmt.Errorf("step_map: %q maps to %q, which is not defined", from, to))
		}
	}
	for k, r := range a.Reducers {
		if r == nil {
			errs = append(errs, fmt.Errorf("reducer of state key %q is nil", k))
		}
	}
	for i, h := range a.Hooks {
		if h.Name == "" {
			errs = append(errs, fmt.Errorf("hook %d has no name", i))
		}
		for _, n := range h.Steps {
			if !a.hasStep(n) || n == StepEnd {
				errs = append(errs, fmt.Errorf("hook %q: step %q is not defined", h.Name, n))
			}
		}
	}
	if err := answer.CheckSelectors(a.Breakpoints); err != nil {
		errs = append(errs, err)
	}
	if a.Context.TokenBudget < NoTokenBudget {
		errs = append(errs, fmt.Errorf("context token budget %d must be positive, 0 (from the model's context window) or NoTokenBudget", a.Context.TokenBudget))
	}
	if s := a.Context.Strategy; s != "" && s != "trim" && s != "summarize" {
		errs = append(errs, fmt.Errorf("context strategy %q must be trim or summarize", s))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stepwise: agent %q: %w", a.Name, err)
	}
	return nil
}

func (a *Agent) hasStep(name string) bool {
	switch name {
	case StepLLM, StepTools, StepEnd:
		return true
	}
	_, ok := a.Steps[name]
	return ok
}

// exec is the policy as the execution's machinery takes it.
func (p RetryPolicy) exec() runexec.Retry {
	return runexec.Retry{MaxAttempts: p.MaxAttempts, Initial: p.InitialInterval, Max: p.MaxInterval, Multiplier: p.Multiplier}
}
