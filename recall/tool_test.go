package recall_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// sessionsIn lists the sessions named in a tool result, in order.
func sessionsIn(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if _, rest, ok := strings.Cut(line, " · session "); ok {
			out = append(out, strings.Fields(rest)[0])
		}
	}
	return strings.Join(out, " ")
}

func callTool(t *testing.T, tl tool.Tool, sessionID, runID, args string) *tool.Result {
	t.Helper()
	res, err := tl.Call(t.Context(), &tool.Call{ID: "c", Name: recall.ToolName, Arguments: json.RawMessage(args), SessionID: sessionID, RunID: runID})
	if err != nil {
		t.Fatalf("call %s: %v", args, err)
	}
	return res
}

func TestToolScopes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	history(t, st)
	emb := recall.DefaultEmbedder()
	newTool := func(cfg recall.ToolConfig) tool.Tool {
		cfg.Store, cfg.Embedder = st, emb
		tl, err := recall.NewTool(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	agentScope := newTool(recall.ToolConfig{})
	if def := agentScope.Definition(); def.Name != "past_steps_search" || !strings.Contains(string(def.Parameters), `"query"`) {
		t.Fatalf("definition %+v", def)
	}
	res := callTool(t, agentScope, "s-db", "r2", `{"query":"deploy billing"}`)
	if res.IsError || res.Content != "No matching past steps (nothing has been embedded yet)." {
		t.Errorf("before any embedding: %+v", res)
	}
	backfill(t, st, emb)

	// Agent scope, from a session of ops, excluding the calling run r2:
	// only s-deploy remains.
	res = callTool(t, agentScope, "s-db", "r2", `{"query":"deploy billing", "k": 50}`)
	if got := sessionsIn(res.Content); got != "s-deploy s-deploy s-deploy" {
		t.Errorf("agent scope: sessions %q\n%s", got, res.Content)
	}
	res = callTool(t, agentScope, "s-db", "r2", `{"query":"deploy billing", "k": 1, "kinds": ["tool"]}`)
	if !strings.Contains(res.Content, "Action Purpose: call deploy") || sessionsIn(res.Content) != "s-deploy" {
		t.Errorf("k=1 kinds=tool:\n%s", res.Content)
	}
	// Session scope, including the calling run.
	session := newTool(recall.ToolConfig{Scope: recall.ScopeSession, IncludeCurrentRun: true})
	res = callTool(t, session, "s-db", "r2", `{"query":"deploy billing"}`)
	if got := sessionsIn(res.Content); got != "s-db s-db" {
		t.Errorf("session scope: %q", got)
	}
	// All scope, bounded by MaxK, restricted kinds.
	all := newTool(recall.ToolConfig{Scope: recall.ScopeAll, K: 2, MaxK: 3, Kinds: []steptype.Kind{steptype.KindUser}})
	if got := sessionsIn(callTool(t, all, "s-db", "", `{"query":"haiku billing migration","k":10}`).Content); got != "s-deploy s-db s-chat" {
		t.Errorf("all scope: %q", got)
	}
	if res := callTool(t, all, "", "", `{"query":"haiku billing migration","kinds":["tool"]}`); !strings.HasPrefix(res.Content, "No matching past steps") {
		t.Errorf("kinds outside the configured ones: %q", res.Content)
	}
	// Bad arguments are results the model can read.
	for _, args := range []string{`{}`, `{"query": 3}`, `{"query":"x","kinds":["thought"]}`, `{"query":"  "}`, `{"query":"x","k":-1}`} {
		res, err := all.Call(t.Context(), &tool.Call{Arguments: json.RawMessage(args)})
		if err == nil && !res.IsError {
			t.Errorf("args %s: %+v", args, res)
		}
	}
	for _, cfg := range []recall.ToolConfig{
		{Store: st},
		{Embedder: emb},
		{Store: st, Embedder: emb, Scope: "everything"},
		{Store: st, Embedder: emb, K: 30},
		{Store: st, Embedder: emb, K: -1},
	} {
		if _, err := recall.NewTool(cfg); err == nil {
			t.Errorf("NewTool(%+v) succeeded", cfg)
		}
	}
	if _, err := recall.NewTool(recall.ToolConfig{Embedder: emb}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no store: %v", err)
	}
}
