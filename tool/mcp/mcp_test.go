package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/mcp"
)

// inMemory connects a client to a fresh in-process server.
func inMemory(t *testing.T, prefix string) (*mcp.Client, *atomic.Int64) {
	t.Helper()
	calls := new(atomic.Int64)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := newServer(calls).Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c, err := mcp.Connect(context.Background(), mcp.ServerConfig{Name: "mem", Transport: ct, ToolPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, calls
}

// toolSet lists the client's tools into a Set.
func toolSet(t *testing.T, c *mcp.Client) *tool.Set {
	t.Helper()
	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func callTool(t *testing.T, set *tool.Set, name, args string) (*tool.Result, error) {
	t.Helper()
	return set.Call(context.Background(), &tool.Call{ID: "call_1", Name: name, Arguments: json.RawMessage(args), IdempotencyKey: "run9/3/call_1"})
}

func TestToolsListed(t *testing.T) {
	t.Parallel()
	c, _ := inMemory(t, "t_")
	set := toolSet(t, c)
	var names []string
	for _, d := range set.Defs() {
		names = append(names, d.Name)
	}
	want := "t_add,t_crash,t_fail,t_internal,t_mixed,t_ns_key,t_strict"
	if strings.Join(names, ",") != want {
		t.Errorf("names = %v, want %s", names, want)
	}
	add, _ := set.Get("t_add")
	def := add.Definition()
	if def.Description != "Adds two integers." || !strings.Contains(string(def.Parameters), `"first addend"`) || !strings.Contains(string(def.Parameters), `"required":["a","b"]`) {
		t.Errorf("definition = %s %s", def.Description, def.Parameters)
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	c, calls := inMemory(t, "")
	set := toolSet(t, c)

	res, err := callTool(t, set, "add", `{"a":2,"b":40}`)
	if err != nil || res.IsError || res.Content != `{"sum":42}` {
		t.Fatalf("add: %+v, %v", res, err)
	}
	// The structured content is the step's outputs.
	if string(res.Output) != `{"sum":42}` {
		t.Errorf("output = %s", res.Output)
	}

	res, err = callTool(t, set, "ns_key", `{"env":"HOME"}`)
	if err != nil || !strings.HasPrefix(res.Content, "key=run9/3/call_1\n") {
		t.Errorf("idempotency key not sent: %+v, %v", res, err)
	}

	res, err = callTool(t, set, "mixed", ``)
	if err != nil || res.Content != "a chart:\n[image image/png, 3 bytes]" {
		t.Errorf("mixed: %+v, %v", res, err)
	}
	if err == nil && (len(res.Attachments) != 1 || res.Attachments[0].ContentType != "image/png" || string(res.Attachments[0].Data) != "\x01\x02\x03") {
		t.Errorf("mixed: attachments %+v, want the PNG image", res.Attachments)
	}
	if calls.Load() != 3 {
		t.Errorf("server ran %d tool calls, want 3", calls.Load())
	}
}

func TestToolErrorIsResult(t *testing.T) {
	t.Parallel()
	c, _ := inMemory(t, "")
	set := toolSet(t, c)
	res, err := callTool(t, set, "fail", `{}`)
	if err != nil {
		t.Fatalf("tool error became Go error %v", err)
	}
	if !res.IsError || !strings.Contains(res.Content, "disk on fire") {
		t.Errorf("result = %+v", res)
	}
}

func TestBadArguments(t *testing.T) {
	t.Parallel()
	c, calls := inMemory(t, "")
	set := toolSet(t, c)
	for _, tc := range []struct{ args, want string }{
		{`{"a":1}`, `field "b" is required`},
		{`{"a":1,"b":"two"}`, `field "b" must be integer, got string "two"`},
		{`{"a":1,"b":2,"c":3}`, `field "c" is not allowed`},
		{`{"a":`, "not valid JSON"},
	} {
		res, err := callTool(t, set, "add", tc.args)
		if err != nil || !res.IsError || !strings.Contains(res.Content, tc.want) {
			t.Errorf("%s: %+v, %v; want %q", tc.args, res, err, tc.want)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("bad arguments reached the server %d times", calls.Load())
	}
	// Arguments the client cannot check are refused by the server: still a
	// result the model can read.
	res, err := callTool(t, set, "strict", `{"x":1}`)
	if err != nil || !res.IsError || !strings.Contains(res.Content, `"x" must be a widget`) {
		t.Errorf("server-side refusal: %+v, %v", res, err)
	}
}

func TestProtocolErrorIsPermanent(t *testing.T) {
	t.Parallel()
	c, _ := inMemory(t, "")
	set := toolSet(t, c)
	res, err := callTool(t, set, "internal", `{}`)
	if res != nil || err == nil || !strings.Contains(err.Error(), "database unavailable") || llm.Classify(err) != steptype.ErrorPermanent {
		t.Errorf("got %+v, %v (class %q)", res, err, llm.Classify(err))
	}
	// The session survives a protocol error.
	if res, err := callTool(t, set, "add", `{"a":1,"b":1}`); err != nil || res.Content != `{"sum":2}` {
		t.Errorf("after protocol error: %+v, %v", res, err)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	c, _ := inMemory(t, "")
	set := toolSet(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := callTool(t, set, "add", `{"a":1,"b":1}`)
	if !errors.Is(err, mcp.ErrClosed) || llm.Classify(err) != steptype.ErrorPermanent {
		t.Errorf("call after Close: %v", err)
	}
	if _, err := c.Tools(context.Background()); !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("Tools after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	st, _ := sdk.NewInMemoryTransports()
	for _, cfg := range []mcp.ServerConfig{
		{},
		{Command: "x", URL: "http://127.0.0.1/"},
		{URL: "ftp://127.0.0.1/"},
		{URL: "127.0.0.1:80"},
		{Command: "x", Transport: st},
	} {
		if c, err := mcp.Connect(context.Background(), cfg); err == nil {
			c.Close()
			t.Errorf("%+v accepted", cfg)
		}
	}
	_, err := mcp.Connect(context.Background(), mcp.ServerConfig{Command: "/nonexistent/mcp-server"})
	if err == nil || !strings.Contains(err.Error(), "mcp mcp-server: connect") {
		t.Errorf("missing command: %v", err)
	}
}

// httpServer serves the test server over streamable HTTP on loopback; while
// down is set it answers 503 to everything.
func httpServer(t *testing.T) (*httptest.Server, *atomic.Bool, *atomic.Value) {
	t.Helper()
	down := new(atomic.Bool)
	auth := new(atomic.Value)
	auth.Store("")
	srvMCP := newServer(nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srvMCP }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, down, auth
}

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	srv, down, auth := httpServer(t)
	c, err := mcp.Connect(context.Background(), mcp.ServerConfig{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer tok"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.HasPrefix(c.Name(), "127.0.0.1:") {
		t.Errorf("default name = %q", c.Name())
	}
	set := toolSet(t, c)
	if res, err := callTool(t, set, "add", `{"a":20,"b":22}`); err != nil || res.Content != `{"sum":42}` {
		t.Fatalf("add: %+v, %v", res, err)
	}
	if auth.Load() != "Bearer tok" {
		t.Errorf("Authorization = %q", auth.Load())
	}
	if res, err := callTool(t, set, "fail", `{}`); err != nil || !res.IsError {
		t.Errorf("fail over HTTP: %+v, %v", res, err)
	}

	// A transport failure is a transient error...
	down.Store(true)
	_, err = callTool(t, set, "add", `{"a":1,"b":1}`)
	if err == nil || llm.Classify(err) != steptype.ErrorTransient {
		t.Fatalf("server down: err = %v, class %q; want transient", err, llm.Classify(err))
	}
	// ...and the next call, once the server is back, reconnects.
	down.Store(false)
	if res, err := callTool(t, set, "add", `{"a":1,"b":1}`); err != nil || res.Content != `{"sum":2}` {
		t.Errorf("after recovery: %+v, %v", res, err)
	}
}

func TestStdio(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcp.Connect(context.Background(), mcp.ServerConfig{
		Command: exe,
		Env:     []string{serverEnv + "=1", "STEPWISE_MCP_GREETING=hi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set := toolSet(t, c)
	if res, err := callTool(t, set, "add", `{"a":3,"b":4}`); err != nil || res.Content != `{"sum":7}` {
		t.Fatalf("add: %+v, %v", res, err)
	}
	for env, want := range map[string]string{"STEPWISE_MCP_GREETING": "hi", secretEnv: "", "PATH": os.Getenv("PATH")} {
		res, err := callTool(t, set, "ns_key", `{"env":"`+env+`"}`)
		if err != nil || !strings.HasSuffix(res.Content, "\n"+env+"="+want) {
			t.Errorf("env %s in the server: %+v, %v; want %q", env, res, err, want)
		}
	}
	// The server dies mid-call: transient error, then a restart.
	_, err = callTool(t, set, "crash", `{}`)
	if err == nil || llm.Classify(err) != steptype.ErrorTransient {
		t.Fatalf("crash: err = %v, class %q; want transient", err, llm.Classify(err))
	}
	if res, err := callTool(t, set, "add", `{"a":5,"b":5}`); err != nil || res.Content != `{"sum":10}` {
		t.Errorf("after restart: %+v, %v", res, err)
	}
}
