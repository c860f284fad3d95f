package agentload_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/store/memory"
)

func TestLoadExample(t *testing.T) {
	l, err := agentload.Load(context.Background(), "../../examples/assistant/agent.yaml", agentload.Options{Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := l.Agent
	if a.Name != "assistant" || a.Model == nil || a.Model.Name() != "scripted:script" || len(a.Tools) != 2 || a.Limits.MaxSteps != 50 {
		t.Fatalf("agent %+v", a)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("s.yaml", "turns: [hello]\n")
	cases := map[string]string{
		write("rerank.yaml", "name: a\nmodel: scripted:s.yaml\ntools: [past_steps_search]\nembeddings: {reranker: {model: scripted:gone.yaml}}\n"): "gone.yaml",
		write("self.yaml", "name: a\nmodel: scripted:s.yaml\nsub_agents: [self.yaml]\n"):                                                           "cycle",
		write("nomodel.yaml", "name: a\nmodel: scripted:missing.yaml\n"):                                                                           "missing.yaml",
	}
	for path, want := range cases {
		_, err := agentload.Load(context.Background(), path, agentload.Options{Store: memory.New()})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", filepath.Base(path), err, want)
		}
	}
}

func TestLoadProviders(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_REGION", "us-east-1") // Bedrock needs a region
	for model, provider := range map[string]string{
		"gemini:gemini-2.5-flash":                             "gemini",
		"bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0": "bedrock",
	} {
		p := filepath.Join(dir, provider+".yaml")
		if err := os.WriteFile(p, []byte("name: a\nmodel: "+model+"\nmodel_options: {base_url: http://127.0.0.1:9, api_key_env: TEST_KEY}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := agentload.Load(context.Background(), p, agentload.Options{Store: memory.New()})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		m := l.Agent.Model
		pr, ok := m.(interface{ Provider() string })
		if m.Name() != model || !ok || pr.Provider() != provider {
			t.Errorf("%s: model %s (%T)", model, m.Name(), m)
		}
		l.Close()
	}
}
