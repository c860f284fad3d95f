package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// mcpDeps holds the official MCP TypeScript SDK and the scripts that use it.
var mcpDeps = filepath.Join("..", "..", "internal", "testdeps", "mcp")

// mcpNode returns node's path once the MCP TypeScript SDK is installed in
// internal/testdeps/mcp. Without either the test fails under
// STEPWISE_REQUIRE_NPM=1 and is skipped otherwise.
func mcpNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(mcpDeps, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		msg := "MCP npm test dependencies missing (" + err.Error() + "); install them with: npm ci --prefix internal/testdeps/mcp"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// mcpDrive runs internal/testdeps/mcp/drive.mjs with args (its transport)
// and returns what it saw.
func mcpDrive(t *testing.T, args ...string) map[string]any {
	t.Helper()
	node := mcpNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"drive.mjs"}, args...)...)
	cmd.Dir = mcpDeps
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("drive.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", args[0], err, out, stderr.String())
	}
	var seen map[string]any
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("drive.mjs output %q: %v", out, err)
	}
	return seen
}

// checkMCPDrive checks what drive.mjs saw against the database it drove.
func checkMCPDrive(t *testing.T, db string, seen map[string]any) {
	t.Helper()
	var tools []string
	for _, n := range seen["tools"].([]any) {
		tools = append(tools, n.(string))
	}
	want := []string{"input_answer", "inputs_list", "run_get", "run_start", "session_fork", "session_retry", "sessions_list", "steps_read", "steps_search", "trace_render"}
	if !slices.Equal(tools, want) {
		t.Errorf("tools %v, want %v", tools, want)
	}
	if seen["output"] != "Confirmed and computed: 42." || seen["searchHit"] != true {
		t.Errorf("run output %v, search hit in the run's session %v", seen["output"], seen["searchHit"])
	}
	errs := seen["errors"].(map[string]any)
	for key, want := range map[string]string{"unknownSession": "not found", "unknownAgent": "unknown agent", "forkOutside": "outside session",
		"answeredTwice": "already answered", "missingArgument": "run_id", "badRange": "invalid"} {
		if msg, _ := errs[key].(string); !strings.Contains(msg, want) {
			t.Errorf("error %s: %q does not say %q", key, msg, want)
		}
	}
	if seen["unknownResourceCode"] == nil {
		t.Error("reading an unknown session's resource gave no MCP error code")
	}
	// The database holds what the client saw: the run's session, the fork
	// and the retry's fork, and nothing from the refused calls.
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.SessionList(context.Background(), &store.SessionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 3 || seen["sessions"] != float64(3) {
		t.Errorf("%d sessions in the database, the client listed %v; want 3", len(page.Sessions), seen["sessions"])
	}
}

// TestMCPServerStdio drives `stepwise mcp` over stdio with the official
// TypeScript client: a run started, its request answered, steps, trace,
// search, fork, retry, resources and bad calls.
func TestMCPServerStdio(t *testing.T) {
	t.Parallel()
	agent, _ := filepath.Abs("testdata/hitl/agent.yaml")
	db := filepath.Join(t.TempDir(), "mcp.db")
	seen := mcpDrive(t, "stdio", bin, "--db", "sqlite:"+db, "mcp", "--agent", agent)
	checkMCPDrive(t, db, seen)
}

// TestMCPServerHTTP drives /mcp of `stepwise serve` over streamable HTTP
// with the official TypeScript client, with the server's bearer token;
// without it /mcp answers 401.
func TestMCPServerHTTP(t *testing.T) {
	t.Parallel()
	agent, _ := filepath.Abs("testdata/hitl/agent.yaml")
	dir := t.TempDir()
	db := filepath.Join(dir, "mcp.db")
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--db", "sqlite:"+db, "serve", "--addr", addr, "--agent", agent, "--token", "mcp-secret-token")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr + "/mcp"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("POST /mcp without a token: %s, want 401", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := mcpDrive(t, "http", url, "mcp-secret-token")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	checkMCPDrive(t, db, seen)
}

// TestMCPServerRefusesServer: `stepwise mcp` serves a database; with
// --server it is a usage error that names the server's /mcp, and stdout
// (the protocol's channel) stays empty.
func TestMCPServerRefusesServer(t *testing.T) {
	t.Parallel()
	out, errOut, code := stepwise(t, t.TempDir(), "--server", "http://127.0.0.1:1", "mcp")
	if code != 2 || out != "" || !strings.Contains(errOut, "http://127.0.0.1:1/mcp") {
		t.Errorf("mcp --server: exit %d, stdout %q, stderr %q; want 2, nothing, the server's /mcp", code, out, errOut)
	}
}
