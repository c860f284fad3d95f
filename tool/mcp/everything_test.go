package mcp_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/mcp"
)

// testdeps is where `npm install --prefix internal/testdeps` puts the npm
// packages tests use (see internal/testdeps/package.json).
const testdeps = "../../internal/testdeps"

// everythingCommand finds the reference server @modelcontextprotocol/
// server-everything. Without it the test fails when STEPWISE_REQUIRE_NPM=1
// and is skipped otherwise.
func everythingCommand(t *testing.T) (string, []string) {
	t.Helper()
	pkg := filepath.Join(testdeps, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	bin := filepath.Join(testdeps, "node_modules", ".bin", "mcp-server-everything")
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(pkg); err == nil && nodeErr == nil {
		abs, _ := filepath.Abs(pkg)
		return node, []string{abs, "stdio"}
	}
	if _, err := os.Stat(bin); err == nil && nodeErr == nil {
		abs, _ := filepath.Abs(bin)
		return abs, []string{"stdio"}
	}
	msg := "@modelcontextprotocol/server-everything is not installed (or node is not on PATH); install it with: npm install --prefix internal/testdeps (from the module root)"
	if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return "", nil
}

// lockedBuffer collects a subprocess's stderr for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServerEverything(t *testing.T) {
	t.Parallel()
	command, args := everythingCommand(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stderr := new(lockedBuffer)
	c, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "everything", Command: command, Args: args, Stderr: stderr, ToolPrefix: "everything_"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatalf("tools: %v\nstderr:\n%s", err, stderr)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatalf("the server's tools do not form a Set: %v", err)
	}
	var names []string
	for _, d := range set.Defs() {
		names = append(names, d.Name)
	}
	t.Logf("tools: %s", strings.Join(names, " "))

	// The sum tool was "add" in older releases, "get-sum" in newer ones.
	sum := "everything_get-sum"
	if _, ok := set.Get(sum); !ok {
		sum = "everything_add"
	}
	for _, name := range []string{"everything_echo", sum} {
		if _, ok := set.Get(name); !ok {
			t.Fatalf("no %s among %v", name, names)
		}
	}

	call := func(name, args string) (*tool.Result, error) {
		return set.Call(ctx, &tool.Call{ID: "c1", Name: name, Arguments: []byte(args), IdempotencyKey: "k1"})
	}
	res, err := call("everything_echo", `{"message":"hello from stepwise"}`)
	if err != nil || res.IsError || res.Content != "Echo: hello from stepwise" {
		t.Errorf("echo: %+v, %v", res, err)
	}
	res, err = call(sum, `{"a":2,"b":3.5}`)
	if err != nil || res.IsError || !strings.Contains(res.Content, "5.5") {
		t.Errorf("sum: %+v, %v", res, err)
	}
	if _, ok := set.Get("everything_get-tiny-image"); ok {
		res, err = call("everything_get-tiny-image", `{}`)
		if err != nil || res.IsError || !strings.Contains(res.Content, "[image image/png") {
			t.Errorf("tiny image: %+v, %v", res, err)
		}
	}
	// Arguments are checked against the server's own schema first.
	res, err = call(sum, `{"a":"two","b":3}`)
	if err != nil || !res.IsError || !strings.Contains(res.Content, `field "a" must be number`) {
		t.Errorf("sum with bad arguments: %+v, %v", res, err)
	}
	res, err = call("everything_echo", `{}`)
	if err != nil || !res.IsError || !strings.Contains(res.Content, `field "message" is required`) {
		t.Errorf("echo without message: %+v, %v", res, err)
	}
}
