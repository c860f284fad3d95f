package agentfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/agentfile"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestLoadFull(t *testing.T) {
	t.Parallel()
	got, err := agentfile.Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.2
	want := &agentfile.Spec{
		File:         "testdata/full.yaml",
		Dir:          "testdata",
		Name:         "support-bot",
		Description:  "Answers customer questions about orders.",
		Instructions: "You are a support agent for Example Corp.\nBe brief. Ask before refunding anything.\n",
		Model:        agentfile.Model{Provider: "openai", Name: "gpt-4o-mini"},
		ModelOptions: agentfile.ModelOptions{BaseURL: "http://localhost:11434/v1", APIKeyEnv: "LOCAL_LLM_KEY",
			Temperature: &temp, MaxTokens: 1024, Timeout: time.Minute},
		Tools: []agentfile.Tool{
			{Name: "calculator"}, {Name: "clock"},
			{Name: "files", Root: filepath.Join("testdata", "data")},
			{Name: "http_get", AllowHosts: []string{"api.example.com", "*.example.org", "localhost:8080"}},
			{Name: "ask_human"}, {Name: "past_steps_search"}, {Name: "trace"},
		},
		MCPServers: []agentfile.MCPServer{
			{Name: "orders", Command: filepath.Join("testdata", "bin", "orders-mcp"), Args: []string{"--db", "orders.db"},
				Env: map[string]string{"ORDERS_READONLY": "1"}},
			{Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer example-token"}},
		},
		SubAgents: []string{filepath.Join("testdata", "helpers", "refunds.yaml")},
		StartStep: "llm",
		Limits: agentfile.Limits{MaxSteps: 200, StepTimeout: 2 * time.Minute, RunTimeout: 30 * time.Minute,
			MaxParallelTools: 4, MaxDepth: 3},
		Retry:     agentfile.Retry{MaxAttempts: 5, InitialInterval: 500 * time.Millisecond, MaxInterval: 30 * time.Second},
		Approvals: map[string]agentfile.Approval{"files": "always", "calculator": "never", "*": "always"},
		Context:   agentfile.ContextPolicy{TokenBudget: 64000, Strategy: "summarize"},
		Embeddings: agentfile.Embeddings{Kinds: []steptype.Kind{steptype.KindUser, steptype.KindLLM},
			Embedder: "openai:text-embedding-3-small"},
		Prices:      map[string]agentfile.Price{"openai:gpt-4o-mini": {Input: 0.15, Output: 0.6, Cached: 0.075}},
		Reducers:    map[string]string{"findings": "append", "calls": "sum"},
		OnUpdate:    "restart",
		StepMap:     map[string]string{"review": "check"},
		Breakpoints: agentfile.Breakpoints{Before: []string{"tools"}, After: []string{"tool:files"}},
		Metadata:    map[string]any{"team": "support", "tier": int64(2), "tags": []any{"beta", "eu"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", got, want)
	}
	if got.Model.String() != "openai:gpt-4o-mini" {
		t.Fatalf("Model.String() = %q", got.Model.String())
	}
}

func TestLoadJSON(t *testing.T) {
	t.Parallel()
	got, err := agentfile.Load("testdata/full.json")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "json-agent" || len(got.Tools) != 2 || got.Tools[1].AllowHosts[0] != "*" ||
		got.Limits.RunTimeout != 10*time.Minute || got.Approvals["http_get"] != agentfile.ApprovalAlways {
		t.Fatalf("%+v", got)
	}
	want := map[string]any{"nested": map[string]any{"a": []any{int64(1), 2.5, true, nil}}}
	if !reflect.DeepEqual(got.Metadata, want) {
		t.Fatalf("metadata %#v", got.Metadata)
	}
}

// TestExamplesAreRunnable loads every example agent, its sub-agents and its
// scripted model, as the CLI would.
func TestExamplesAreRunnable(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.*")
	helpers, _ := filepath.Glob("testdata/helpers/*.yaml")
	files = append(files, helpers...)
	if len(files) < 5 {
		t.Fatalf("only %d example files", len(files))
	}
	for _, f := range files {
		s, err := agentfile.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if s.Model.Provider == agentfile.ProviderScripted {
			m, err := scripted.Load(s.Model.Name)
			if err != nil {
				t.Errorf("%s: model: %v", f, err)
			} else if m.Name() != "scripted:calculator" {
				t.Errorf("%s: model name %q", f, m.Name())
			}
		}
		for _, sub := range s.SubAgents {
			if _, err := agentfile.Load(sub); err != nil {
				t.Errorf("%s: sub-agent: %v", f, err)
			}
		}
	}
}

func TestRelativePaths(t *testing.T) {
	t.Parallel()
	src := "name: a\nmodel: scripted:../s.yaml\nsub_agents: [b.yaml, /abs/c.yaml]\ntools: [{files: {root: /srv/data}}]\n" +
		"mcp_servers: [{name: x, command: npx, args: [srv]}, {name: y, command: tools/srv}]\n"
	s, err := agentfile.Parse(filepath.Join("agents", "a.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.Model.Name != "s.yaml" || s.SubAgents[0] != filepath.Join("agents", "b.yaml") || s.SubAgents[1] != "/abs/c.yaml" ||
		s.Tools[0].Root != "/srv/data" || s.MCPServers[0].Command != "npx" || s.MCPServers[1].Command != filepath.Join("agents", "tools", "srv") {
		t.Fatalf("%+v", s)
	}
	if s, err := agentfile.Parse("a.yaml", []byte(src)); err != nil || s.Dir != "." || s.SubAgents[0] != "b.yaml" {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestA2ASubAgents(t *testing.T) {
	t.Parallel()
	src := "name: a\nmodel: openai:o\nsub_agents:\n  - b.yaml\n  - a2a: http://127.0.0.1:8081/a2a/researcher\n    name: researcher\n" +
		"    description: Finds things.\n    headers: {X-Team: docs}\n    token_env: RESEARCHER_TOKEN\n  - {a2a: 'https://h/.well-known/agent-card.json'}\n"
	s, err := agentfile.Parse("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []agentfile.A2AAgent{
		{URL: "http://127.0.0.1:8081/a2a/researcher", Name: "researcher", Description: "Finds things.", Headers: map[string]string{"X-Team": "docs"}, TokenEnv: "RESEARCHER_TOKEN"},
		{URL: "https://h/.well-known/agent-card.json"},
	}
	if len(s.SubAgents) != 1 || s.SubAgents[0] != "b.yaml" || !reflect.DeepEqual(s.A2AAgents, want) {
		t.Fatalf("sub-agents %v, A2A %+v", s.SubAgents, s.A2AAgents)
	}
}

func TestNullMeansUnset(t *testing.T) {
	t.Parallel()
	s, err := agentfile.Parse("a.yaml", []byte("name: a\nmodel: openai:o\ndescription:\ntools:\nlimits:\nmetadata: ~\nmodel_options: {temperature: null}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Description != "" || s.Tools != nil || s.Limits != (agentfile.Limits{}) || s.Metadata != nil || s.ModelOptions.Temperature != nil {
		t.Fatalf("%+v", s)
	}
}

func TestLoadMissing(t *testing.T) {
	t.Parallel()
	if _, err := agentfile.Load("testdata/nope.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

// `token_budget: none` asks for no budget at all; a missing one leaves the
// engine's default.
func TestTokenBudgetNone(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]int{
		"name: a\nmodel: openai:gpt-4o\ncontext: {token_budget: none}\n": agentfile.NoTokenBudget,
		"name: a\nmodel: openai:gpt-4o\ncontext: {token_budget: 900}\n":  900,
		"name: a\nmodel: openai:gpt-4o\n":                                0,
	} {
		s, err := agentfile.Parse("agent.yaml", []byte(src))
		if err != nil || s.Context.TokenBudget != want {
			t.Errorf("%q: %v, budget %d, want %d", src, err, s.Context.TokenBudget, want)
		}
	}
}
