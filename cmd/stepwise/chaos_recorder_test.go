package main_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// execution is one run of the side-effect tool's handler: which server
// incarnation (header X-Chaos-Server, "server.incarnation") called it, and
// when.
type execution struct {
	Key, Server, Tool, Note string
	At                      time.Time
}

// recorder is the chaos test's side-effect tool: an MCP server over
// streamable HTTP in the test process, which is never killed. Each call
// records its idempotency key and its caller before it returns, so the
// record survives any kill of the calling server; the result names both,
// so the committed tool step says which execution it is.
type recorder struct {
	mu    sync.Mutex
	execs map[string][]execution // by idempotency key, in arrival order
	total int
}

type recordArgs struct {
	Note string `json:"note" jsonschema:"what to record"`
}

// newRecorder serves the tools record (no approval) and guarded (the agent
// file asks a human first) on loopback.
func newRecorder(t *testing.T) (*recorder, string) {
	t.Helper()
	r := &recorder{execs: map[string][]execution{}}
	s := sdk.NewServer(&sdk.Implementation{Name: "chaos-recorder", Version: "1"}, nil)
	for _, name := range []string{"record", "guarded"} {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Records a note, once per idempotency key (counts executions)."},
			func(ctx context.Context, req *sdk.CallToolRequest, a recordArgs) (*sdk.CallToolResult, any, error) {
				key, _ := req.Params.Meta["stepwise.run/idempotency-key"].(string)
				server := req.Extra.Header.Get("X-Chaos-Server")
				r.mu.Lock()
				r.execs[key] = append(r.execs[key], execution{Key: key, Server: server, Tool: name, Note: a.Note, At: time.Now()})
				r.total++
				r.mu.Unlock()
				return &sdk.CallToolResult{Content: []sdk.Content{
					&sdk.TextContent{Text: fmt.Sprintf("recorded key=%s server=%s note=%s", key, server, a.Note)},
				}}, nil, nil
			})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// snapshot copies the executions.
func (r *recorder) snapshot() (map[string][]execution, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]execution, len(r.execs))
	for k, v := range r.execs {
		out[k] = append([]execution(nil), v...)
	}
	return out, r.total
}
