package agentload_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/internal/agentload"
)

// TestLoadA2ASubAgent: a remote A2A sub-agent becomes a tool named and
// described by its card (unless the file says), whose card request
// carries the file's headers and the bearer token of token_env.
func TestLoadA2ASubAgent(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/a2a/finder/.well-known/agent-card.json" {
			http.NotFound(w, r)
			return
		}
		got = r.Header.Clone()
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "finder", "description": "Finds things.",
			"supportedInterfaces": []any{map[string]any{"url": "http://" + r.Host + "/a2a/finder", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}})
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("s.yaml", "turns: [hello]\n")
	t.Setenv("AGENTLOAD_A2A_TOKEN", "t0ken")
	p := write("a.yaml", "name: a\nmodel: scripted:s.yaml\nsub_agents:\n  - a2a: "+srv.URL+"/a2a/finder\n    headers: {X-Team: docs}\n    token_env: AGENTLOAD_A2A_TOKEN\n"+
		"  - {a2a: '"+srv.URL+"/a2a/finder', name: seeker, description: Seeks.}\n")
	l, err := agentload.Load(context.Background(), p, agentload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var defs []string
	for _, tl := range l.Agent.Tools {
		d := tl.Definition()
		defs = append(defs, d.Name+": "+d.Description)
	}
	if len(defs) != 2 || defs[0] != "finder: Finds things." || defs[1] != "seeker: Seeks." {
		t.Errorf("tools %q", defs)
	}
	if got.Get("Authorization") != "" || got.Get("X-Team") != "" {
		t.Errorf("the second card request carries the first entry's headers: %v", got)
	}
	b, err := agentload.Load(context.Background(), write("b.yaml", "name: b\nmodel: scripted:s.yaml\nsub_agents:\n  - a2a: "+srv.URL+"/a2a/finder\n    headers: {X-Team: docs}\n    token_env: AGENTLOAD_A2A_TOKEN\n"), agentload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got.Get("Authorization") != "Bearer t0ken" || got.Get("X-Team") != "docs" {
		t.Errorf("card request headers %v", got)
	}
}
