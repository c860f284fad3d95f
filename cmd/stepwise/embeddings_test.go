package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmbeddingsSection: an agent file's embeddings section is honoured by
// the binary — its embedder (lexical-v1:64) embeds the steps, only its kinds
// (user) are embedded, and its LLM reranker (drop_unlisted, the scripted
// model keeping candidate 1) reranks past_steps_search; stepwise search
// takes --embedder and --rerank-model.
func TestEmbeddingsSection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"agent.yaml": `name: memo
model: scripted:script.yaml
tools: [past_steps_search]
embeddings:
  embedder: lexical-v1:64
  kinds: [user]
  reranker: {model: scripted:rerank.yaml, drop_unlisted: true}
`,
		"script.yaml": "turns:\n  - tool_calls: [{name: past_steps_search, arguments: {query: alpha notes}}]\n  - text: noted\n",
		"rerank.yaml": "turns:\n  - text: '{\"ids\": [1]}'\n",
		"swap.yaml":   "turns:\n  - text: '{\"ids\": [2, 1]}'\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := "sqlite:" + filepath.Join(dir, "m.db")
	var sessions []string
	for _, in := range []string{"alpha notes one", "alpha notes two", "alpha notes three"} {
		out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", "agent.yaml", "--input", in)
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
		sessions = append(sessions, runLine.FindStringSubmatch(out)[1])
	}
	// The third run's search found the two earlier user steps; the reranker
	// kept one.
	out, _, _ := stepwise(t, dir, "--db", db, "steps", sessions[2], "--json")
	var tool struct{ Content string }
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"kind":"tool"`) {
			_ = json.Unmarshal([]byte(line), &tool)
		}
	}
	if !strings.Contains(tool.Content, "[1] score") || strings.Contains(tool.Content, "[2] score") || !strings.Contains(tool.Content, "· user ") {
		t.Fatalf("past_steps_search with the reranker: %q, want one user step", tool.Content)
	}

	search := func(args ...string) (hits []string, code int, errOut string) {
		out, errOut, code := stepwise(t, dir, append([]string{"--db", db, "search", "alpha notes", "--json"}, args...)...)
		var res struct {
			Steps []struct {
				Step struct {
					ID   string `json:"id"`
					Kind string `json:"kind"`
				} `json:"step"`
			} `json:"steps"`
		}
		_ = json.Unmarshal([]byte(out), &res)
		for _, h := range res.Steps {
			hits = append(hits, h.Step.Kind+":"+h.Step.ID)
		}
		return hits, code, errOut
	}
	plain, code, errOut := search("--embedder", "lexical-v1:64")
	if code != 0 || len(plain) != 3 {
		t.Fatalf("search --embedder lexical-v1:64: exit %d %q: %v, want the 3 user steps", code, errOut, plain)
	}
	for _, h := range plain {
		if !strings.HasPrefix(h, "user:") {
			t.Errorf("a %s step was embedded (kinds: [user])", h)
		}
	}
	if _, code, errOut := search(); code == 0 || !strings.Contains(errOut, "lexical-v1:64") {
		t.Errorf("search with the default embedder: exit %d %q; want an error naming the embedder used", code, errOut)
	}
	swapped, code, errOut := search("--embedder", "lexical-v1:64", "--rerank-model", "scripted:swap.yaml")
	if code != 0 || len(swapped) != 3 || swapped[0] != plain[1] || swapped[1] != plain[0] {
		t.Fatalf("search --rerank-model: exit %d %q: %v, want %v with the first two swapped", code, errOut, swapped, plain)
	}
}
