package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/fakeopenai"
)

// fileAgent writes an agent file of a model served by fake and returns its
// path; its runs need FILE_AGENT_KEY in their environment.
func fileAgent(t *testing.T, dir, name string, fake *fakeopenai.Server) string {
	t.Helper()
	p := filepath.Join(dir, name+".yaml")
	body := fmt.Sprintf("name: %s\ninstructions: You answer briefly.\nmodel: openai:gpt-4o-mini\nmodel_options: {base_url: %q, api_key_env: FILE_AGENT_KEY}\ntools: [calculator]\n",
		name, fake.URL+"/v1")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestContextOfFileAgent: `stepwise context SESSION` of a session of an
// agent file rebuilds its messages without the file, as the HTTP context
// endpoint does (saying what it leaves out), and the whole request with it.
func TestContextOfFileAgent(t *testing.T) {
	t.Parallel()
	fake := fakeopenai.New(fakeopenai.Config{Iterations: 1, Tool: "calculator", Args: `{"expression":"2+3"}`, Final: "five"})
	defer fake.Close()
	dir := t.TempDir()
	env := []string{"FILE_AGENT_KEY=sk-test-0123456789"}
	agent := fileAgent(t, dir, "helper", fake)
	db := "sqlite:" + filepath.Join(dir, "c.db")
	out, errOut, code := stepwiseEnv(t, dir, env, "--db", db, "run", "--agent", agent, "--input", "What is 2+3?")
	m := runLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	type request struct {
		System   string            `json:"system"`
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	read := func(args ...string) (request, string) {
		t.Helper()
		out, errOut, code := stepwiseEnv(t, dir, env, append([]string{"--db", db, "context", m[1]}, args...)...)
		var req request
		if code != 0 || json.Unmarshal([]byte(out), &req) != nil {
			t.Fatalf("context %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return req, errOut
	}
	bare, note := read()
	if len(bare.Messages) != 4 || bare.System != "" || len(bare.Tools) != 0 || !strings.Contains(string(bare.Messages[0]), "What is 2+3?") {
		t.Errorf("context without the agent file: %+v", bare)
	}
	if !strings.Contains(note, `agent "helper" is not loaded here`) || !strings.Contains(note, "--agent FILE") {
		t.Errorf("context without the agent file says %q", note)
	}
	full, note := read("--agent", agent)
	if len(full.Messages) != 4 || !strings.Contains(full.System, "You answer briefly.") || len(full.Tools) != 1 || note != "" {
		t.Errorf("context with the agent file: %+v, %q", full, note)
	}
}
