// Package agentload turns declarative agent files (internal/agentfile) into
// engine agents: it builds the model client, the built-in tools, the MCP
// server connections and the sub-agents. The CLI and the server use it.
package agentload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/stepwise-run/stepwise/render"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/agentfile"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/a2a"
	"github.com/stepwise-run/stepwise/tool/builtin"
	"github.com/stepwise-run/stepwise/tool/mcp"
)

// Options are what a loaded agent may need from its host.
type Options struct {
	// Store backs the trace and past_steps_search tools.
	Store store.Store
	// Extra builds tools the loader does not know itself (by name), e.g.
	// past_steps_search from package recall. Nil entries are refused.
	Extra map[string]func(spec agentfile.Tool) (tool.Tool, error)
	// Events is the default of observe.events: whether the events inside
	// steps are recorded for agents whose file does not say.
	Events bool
	// Embedder is the process's embedder (see Embedder), used by
	// past_steps_search. Default recall.DefaultEmbedder().
	Embedder recall.Embedder
}

// Loaded is an agent built from a file, with the resources it holds.
type Loaded struct {
	Agent  *stepwise.Agent
	Spec   *agentfile.Spec
	Prices llm.PriceTable // prices declared in the file (and its sub-agents)
	// Observed is the observe section of the file and of its sub-agents'
	// files, by agent name.
	Observed map[string]*Observed
	closers  []func() error
}

// Close releases MCP connections (and their processes).
func (l *Loaded) Close() error {
	var errs []error
	for _, c := range l.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Load reads an agent file and builds its agent.
func Load(ctx context.Context, path string, o Options) (*Loaded, error) {
	l := &Loaded{Prices: llm.PriceTable{}, Observed: map[string]*Observed{}}
	a, err := l.load(ctx, path, o, map[string]bool{})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.Agent = a
	return l, nil
}

func (l *Loaded) load(ctx context.Context, path string, o Options, seen map[string]bool) (*stepwise.Agent, error) {
	abs, _ := filepath.Abs(path)
	if seen[abs] {
		return nil, fmt.Errorf("%s: sub-agent cycle", path)
	}
	seen[abs] = true
	defer delete(seen, abs)
	spec, err := agentfile.Load(path)
	if err != nil {
		return nil, err
	}
	return l.build(ctx, spec, o, seen)
}

// FromSpec builds the agent of a parsed definition that names no
// sub-agent files (a worker's registration, docs/workers.md).
func FromSpec(ctx context.Context, spec *agentfile.Spec, o Options) (*Loaded, error) {
	if len(spec.SubAgents) > 0 {
		return nil, fmt.Errorf("%s: sub_agents name files; this definition cannot have them", spec.File)
	}
	l := &Loaded{Prices: llm.PriceTable{}, Observed: map[string]*Observed{}}
	a, err := l.build(ctx, spec, o, map[string]bool{})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.Agent = a
	return l, nil
}

func (l *Loaded) build(ctx context.Context, spec *agentfile.Spec, o Options, seen map[string]bool) (*stepwise.Agent, error) {
	if l.Spec == nil {
		l.Spec = spec
	}
	ob, err := observed(spec, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.File, err)
	}
	l.Observed[spec.Name] = ob
	model, err := buildModel(spec, eventsClient(ob.Events))
	if err != nil {
		return nil, fmt.Errorf("%s: model: %w", spec.File, err)
	}
	a := &stepwise.Agent{
		Name: spec.Name, Description: spec.Description, Instructions: spec.Instructions, Model: model,
		StartStep: spec.StartStep,
		Limits: stepwise.Limits{MaxSteps: spec.Limits.MaxSteps, StepTimeout: spec.Limits.StepTimeout, RunTimeout: spec.Limits.RunTimeout,
			MaxParallelTools: spec.Limits.MaxParallelTools, MaxDepth: spec.Limits.MaxDepth},
		Retry:       stepwise.RetryPolicy{MaxAttempts: spec.Retry.MaxAttempts, InitialInterval: spec.Retry.InitialInterval, MaxInterval: spec.Retry.MaxInterval},
		Context:     stepwise.ContextPolicy{TokenBudget: spec.Context.TokenBudget, Strategy: spec.Context.Strategy},
		Temperature: spec.ModelOptions.Temperature,
		MaxTokens:   spec.ModelOptions.MaxTokens,
	}
	a.OnUpdate, a.StepMap = stepwise.UpdateMode(spec.OnUpdate), spec.StepMap
	for key, name := range spec.Reducers {
		if a.Reducers == nil {
			a.Reducers = map[string]stepwise.Reducer{}
		}
		a.Reducers[key] = stepwise.Reducers[name]
	}
	if b := spec.Breakpoints; len(b.Before)+len(b.After) > 0 {
		a.Breakpoints = &stepwise.Breakpoints{Before: b.Before, After: b.After}
	}
	if len(spec.Approvals) > 0 {
		a.Approvals = map[string]stepwise.ApprovalPolicy{}
		for name, p := range spec.Approvals {
			a.Approvals[name] = stepwise.ApprovalPolicy(p)
		}
	}
	for m, p := range spec.Prices {
		l.Prices[m] = llm.Price{Input: p.Input, Output: p.Output, CachedInput: p.Cached}
	}
	for _, t := range spec.Tools {
		if t.Name == agentfile.ToolPastStepsSearch {
			pt, err := pastStepsSearch(spec, o)
			if err != nil {
				return nil, fmt.Errorf("%s: tool %s: %w", spec.File, t.Name, err)
			}
			a.Tools = append(a.Tools, pt)
			continue
		}
		ts, err := buildTool(t, o)
		if err != nil {
			return nil, fmt.Errorf("%s: tool %s: %w", spec.File, t.Name, err)
		}
		a.Tools = append(a.Tools, ts...)
	}
	for _, srv := range spec.MCPServers {
		c, err := mcp.Connect(ctx, mcp.ServerConfig{Name: srv.Name, Command: srv.Command, Args: srv.Args, Env: envList(srv.Env), URL: srv.URL, Headers: srv.Headers, Elicitation: srv.Elicitation})
		if err != nil {
			return nil, fmt.Errorf("%s: mcp server %s: %w", spec.File, srv.Name, err)
		}
		l.closers = append(l.closers, c.Close)
		ts, err := c.Tools(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: mcp server %s: list tools: %w", spec.File, srv.Name, err)
		}
		a.Tools = append(a.Tools, ts...)
	}
	for _, sub := range spec.SubAgents {
		sa, err := l.load(ctx, sub, o, seen)
		if err != nil {
			return nil, err
		}
		a.SubAgents = append(a.SubAgents, sa)
	}
	for _, r := range spec.A2AAgents {
		t, err := remoteAgent(ctx, r)
		if err != nil {
			name := r.Name
			if name == "" {
				name = r.URL
			}
			return nil, fmt.Errorf("%s: sub-agent %s: %w", spec.File, name, err)
		}
		a.Tools = append(a.Tools, t)
	}
	return a, nil
}

// remoteAgent builds the tool of a remote A2A sub-agent: it reads the
// agent's card now, so a wrong URL fails the load.
func remoteAgent(ctx context.Context, r agentfile.A2AAgent) (tool.Tool, error) {
	headers := map[string]string{}
	for k, v := range r.Headers {
		headers[k] = v
	}
	if r.TokenEnv != "" {
		tok := os.Getenv(r.TokenEnv)
		if tok == "" {
			return nil, fmt.Errorf("token_env: %s is not set", r.TokenEnv)
		}
		headers["Authorization"] = "Bearer " + tok
	}
	return a2a.New(ctx, a2a.Config{URL: r.URL, Name: r.Name, Description: r.Description, Headers: headers, CancelCause: stepwise.ErrRunCancelled})
}

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// buildModel creates the model client of a spec; hc, when set, sends the
// provider's HTTP requests.
func buildModel(spec *agentfile.Spec, hc *http.Client) (llm.Model, error) {
	mo := spec.ModelOptions
	key := func(def string) string {
		if mo.APIKeyEnv != "" {
			return os.Getenv(mo.APIKeyEnv)
		}
		return os.Getenv(def)
	}
	switch spec.Model.Provider {
	case agentfile.ProviderScripted:
		return scripted.Load(spec.Model.Name)
	case agentfile.ProviderOpenAI:
		return openai.New(openai.Config{Model: spec.Model.Name, BaseURL: mo.BaseURL, APIKey: key("OPENAI_API_KEY"), Timeout: mo.Timeout, HTTPClient: hc})
	case agentfile.ProviderAnthropic:
		return anthropic.New(anthropic.Config{Model: spec.Model.Name, BaseURL: mo.BaseURL, APIKey: key("ANTHROPIC_API_KEY"), Timeout: mo.Timeout, MaxTokens: mo.MaxTokens, HTTPClient: hc})
	case agentfile.ProviderGemini:
		// No default variable: the package reads GOOGLE_API_KEY, then
		// GEMINI_API_KEY.
		return gemini.New(gemini.Config{Model: spec.Model.Name, BaseURL: mo.BaseURL, APIKey: key(""), Timeout: mo.Timeout, MaxTokens: mo.MaxTokens, HTTPClient: hc})
	case agentfile.ProviderBedrock:
		// Region and SigV4 credentials come from the AWS environment and
		// shared files.
		return bedrock.New(bedrock.Config{Model: spec.Model.Name, BaseURL: mo.BaseURL, BearerToken: key("AWS_BEARER_TOKEN_BEDROCK"), Timeout: mo.Timeout, MaxTokens: mo.MaxTokens, HTTPClient: hc})
	}
	return nil, fmt.Errorf("unknown provider %q", spec.Model.Provider)
}

// buildTool creates a built-in tool.
func buildTool(t agentfile.Tool, o Options) ([]tool.Tool, error) {
	one := func(x tool.Tool, err error) ([]tool.Tool, error) {
		if err != nil {
			return nil, err
		}
		return []tool.Tool{x}, nil
	}
	switch t.Name {
	case agentfile.ToolCalculator:
		return one(builtin.NewCalculator(builtin.CalculatorConfig{}))
	case agentfile.ToolClock:
		return one(builtin.NewClock(builtin.ClockConfig{}))
	case agentfile.ToolFiles:
		return builtin.NewFiles(builtin.FilesConfig{Root: t.Root})
	case agentfile.ToolHTTPGet:
		return one(builtin.NewHTTPGet(builtin.HTTPGetConfig{AllowedHosts: t.AllowHosts}))
	case agentfile.ToolAskHuman:
		return []tool.Tool{stepwise.AskHuman()}, nil
	case agentfile.ToolTrace:
		if o.Store == nil {
			return nil, errors.New("needs a store")
		}
		return []tool.Tool{render.TraceTool(o.Store)}, nil
	}
	if f, ok := o.Extra[t.Name]; ok && f != nil {
		return one(f(t))
	}
	return nil, fmt.Errorf("not available in this build (known: %s)", strings.Join(agentfile.BuiltinTools, ", "))
}
