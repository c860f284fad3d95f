package agentload_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/memory"
)

// TestOpenAICompatibleServer is the example of docs/providers.md: an agent
// file for a local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM
// Studio; OpenRouter with a key) runs a tool loop against one, with no
// OpenAI key in the environment.
func TestOpenAICompatibleServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	srv := fakeopenai.New(fakeopenai.Config{Iterations: 1, Tool: "calculator", Args: `{"expression":"6*7"}`, Final: "It is 42."})
	defer srv.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	// The docs' Ollama example, with the local server's address.
	agent := "name: local\nmodel: openai:llama3.1\nmodel_options: {base_url: " + srv.URL + "/v1}\ntools: [calculator]\n"
	if err := os.WriteFile(path, []byte(agent), 0o644); err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	l, err := agentload.Load(context.Background(), path, agentload.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{l.Agent}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := t.Context()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "local", Input: "What is 6*7?"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunCompleted || srv.Calls() != 2 {
		t.Fatalf("run %s after %d calls: %+v", run.Status, srv.Calls(), run.Error)
	}
	bodies := srv.Bodies()
	var first struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(bodies[0], &first); err != nil || first.Model != "llama3.1" {
		t.Errorf("model sent %q (%v)", first.Model, err)
	}
	if !strings.Contains(string(bodies[1]), `"role":"tool"`) || !strings.Contains(string(bodies[1]), "42") {
		t.Errorf("second request lacks the tool result: %s", bodies[1])
	}
}
