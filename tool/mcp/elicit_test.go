package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/mcp"
)

// elicitServer returns the command of internal/testdeps/mcp/elicit-server.mjs
// (the official TypeScript SDK): missing, the test fails under
// STEPWISE_REQUIRE_NPM=1 and is skipped otherwise.
func elicitServer(t *testing.T) (string, []string) {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join(testdeps, "mcp"))
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		msg := "the MCP TypeScript SDK is not installed (" + err.Error() + "); install it with: npm ci --prefix internal/testdeps/mcp"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, []string{filepath.Join(dir, "elicit-server.mjs")}
}

// TestElicitation: a server's elicitation during a call ends the call with
// tool.InputNeeded (message and schema of the request); the call made again
// with the answer gets it from the client, and the server's structured
// content is the result's output. Without Elicitation the capability is not
// declared and the server's request fails.
func TestElicitation(t *testing.T) {
	t.Parallel()
	command, args := elicitServer(t)
	logFile := filepath.Join(t.TempDir(), "calls.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stderr := new(lockedBuffer)
	c, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "booking", Command: command, Args: args, Env: []string{"CALL_LOG=" + logFile}, Stderr: stderr, Elicitation: true})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil || len(tools) != 1 {
		t.Fatalf("tools: %v %d", err, len(tools))
	}
	book := tools[0]
	call := &tool.Call{ID: "c1", Name: "book_table", Arguments: json.RawMessage(`{"day":"friday"}`), IdempotencyKey: "key-1"}
	_, err = book.Call(ctx, call)
	var need *tool.InputNeeded
	if !errors.As(err, &need) {
		t.Fatalf("first call: %v, want tool.InputNeeded\n%s", err, stderr)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if need.Prompt != "How many people for friday?" || json.Unmarshal(need.Schema, &schema) != nil || schema.Properties["party_size"] == nil ||
		strings.Join(schema.Required, ",") != "party_size" || need.Context["mcp_server"] != "booking" || need.Context["mcp_tool"] != "book_table" {
		t.Fatalf("input needed: %+v schema %s", need, need.Schema)
	}
	call.Answers = []json.RawMessage{json.RawMessage(`{"party_size":4,"note":"window"}`)}
	res, err := book.Call(ctx, call)
	if err != nil || res.IsError {
		t.Fatalf("second call: %+v %v\n%s", res, err, stderr)
	}
	var out struct {
		Booked         bool   `json:"booked"`
		PartySize      int    `json:"party_size"`
		Note           string `json:"note"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || !out.Booked || out.PartySize != 4 || out.Note != "window" || out.IdempotencyKey != "key-1" {
		t.Fatalf("output %s (%v)", res.Output, err)
	}
	if res.Content != "Booked 4 for friday." {
		t.Errorf("content %q", res.Content)
	}
	// The server saw two calls with the same key: the first got no answer
	// (cancelled), the second the person's.
	deadline := time.Now().Add(10 * time.Second)
	var lines []string
	for {
		b, _ := os.ReadFile(logFile)
		if lines = strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"key":"key-1"`) || strings.Contains(lines[0], `"action":"accept"`) ||
		!strings.Contains(lines[1], `"action":"accept"`) || !strings.Contains(lines[1], `"party_size":4`) {
		t.Fatalf("server's call log:\n%s", strings.Join(lines, "\n"))
	}

	// Without Elicitation the server cannot ask: its request fails, and so
	// does the call, as a tool error the model reads.
	plain, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "booking", Command: command, Args: args, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ptools, err := plain.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err = ptools[0].Call(ctx, &tool.Call{ID: "c2", Name: "book_table", Arguments: json.RawMessage(`{"day":"monday"}`)})
	if errors.As(err, &need) || (err == nil && !res.IsError) {
		t.Fatalf("call without elicitation: %+v %v", res, err)
	}
}
