package recall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// ToolName is the name of the built-in search tool.
const ToolName = "past_steps_search"

// Scope says which past steps the tool searches.
type Scope string

// Scopes of the search tool.
const (
	ScopeAgent   Scope = "agent"   // every session of the calling session's agent
	ScopeSession Scope = "session" // the calling session only
	ScopeAll     Scope = "all"     // every session in the store
)

// ToolConfig configures the past_steps_search tool. Store and Embedder are
// required.
type ToolConfig struct {
	// Store must implement store.VectorStore. Required.
	Store store.Store
	// Embedder must be the one the Worker embeds with. Required.
	Embedder Embedder
	// Reranker, when set, reranks the candidates (see Searcher).
	Reranker Reranker
	// Scope is what the tool searches. Default ScopeAgent.
	Scope Scope
	// K is how many steps a search returns unless the model asks for
	// another number. Default 5.
	K int
	// MaxK bounds what the model may ask for. Default 20.
	MaxK int
	// MaxDistance drops weak matches (see Query.MaxDistance). Default 0:
	// no limit.
	MaxDistance float64
	// Kinds restricts the kinds searched. Default: every embedded kind.
	Kinds []steptype.Kind
	// IncludeCurrentRun also searches the steps of the run calling the
	// tool. Default false: an agent looks for what it did before, not for
	// the call it is making.
	IncludeCurrentRun bool
}

// toolArgs are the arguments the model sends.
type toolArgs struct {
	Query string   `json:"query" jsonschema:"what to look for in past steps: a task, an error message, a tool name, a decision"`
	K     int      `json:"k,omitempty" jsonschema:"how many steps to return (default 5)"`
	Kinds []string `json:"kinds,omitempty" jsonschema:"only steps of these kinds: user, llm, tool, agent, decision"`
}

// NewTool returns the past_steps_search tool: it finds the past steps most
// similar to a query and returns them rendered as text (score, session and
// time, then the step in its template via render.Steps), so
// an agent can learn from its own history. Give it to an agent like any
// tool; steps must be embedded by a Worker (or Backfill) with the same
// embedder.
func NewTool(cfg ToolConfig) (tool.Tool, error) {
	if _, err := vectorStore(cfg.Store); err != nil {
		return nil, err
	}
	if cfg.Embedder == nil {
		return nil, invalid("past_steps_search: no embedder")
	}
	cfg.Scope = cmp.Or(cfg.Scope, ScopeAgent)
	if cfg.Scope != ScopeAgent && cfg.Scope != ScopeSession && cfg.Scope != ScopeAll {
		return nil, invalid("past_steps_search: unknown scope %q", cfg.Scope)
	}
	cfg.K, cfg.MaxK = cmp.Or(cfg.K, 5), cmp.Or(cfg.MaxK, 20)
	if cfg.K < 1 || cfg.MaxK < cfg.K || cfg.MaxK > store.MaxVectorK {
		return nil, invalid("past_steps_search: want 1 <= K <= MaxK <= %d, got K %d, MaxK %d", store.MaxVectorK, cfg.K, cfg.MaxK)
	}
	s := &Searcher{Store: cfg.Store, Embedder: cfg.Embedder, Reranker: cfg.Reranker}
	return tool.New(ToolName,
		"Search your own past steps (earlier messages, tool calls and results, decisions) for ones similar to a query, to reuse what worked and avoid what failed.",
		func(ctx context.Context, a toolArgs) (string, error) { return cfg.call(ctx, s, a) }), nil
}

func (cfg *ToolConfig) call(ctx context.Context, s *Searcher, a toolArgs) (string, error) {
	q := Query{Texts: []string{a.Query}, K: cmp.Or(a.K, cfg.K), MaxDistance: cfg.MaxDistance, Kinds: cfg.Kinds}
	if q.K > cfg.MaxK {
		q.K = cfg.MaxK
	}
	if len(a.Kinds) > 0 {
		var kinds []steptype.Kind
		for _, k := range a.Kinds {
			kind, err := steptype.ParseKind(k)
			if err != nil {
				return "", err
			}
			if len(cfg.Kinds) == 0 || slices.Contains(cfg.Kinds, kind) {
				kinds = append(kinds, kind)
			}
		}
		if len(kinds) == 0 {
			return "No matching past steps (none of the requested kinds is searchable).", nil
		}
		q.Kinds = kinds
	}
	if c, ok := tool.CallFrom(ctx); ok {
		if !cfg.IncludeCurrentRun && c.RunID != "" {
			q.ExcludeRunIDs = []string{c.RunID}
		}
		switch {
		case cfg.Scope == ScopeSession && c.SessionID != "":
			q.SessionIDs = []string{c.SessionID}
		case cfg.Scope == ScopeAgent && c.SessionID != "":
			sess, err := cfg.Store.SessionGet(ctx, &store.SessionGetParams{ID: c.SessionID})
			if err != nil {
				return "", fmt.Errorf("session of the call: %w", err)
			}
			q.Agent = sess.Agent
		}
	}
	res, err := s.Search(ctx, q)
	if errors.Is(err, store.ErrNoVectors) {
		return "No matching past steps (nothing has been embedded yet).", nil
	}
	if err != nil {
		return "", err
	}
	return res.Render(), nil
}
