package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// When the test binary runs with this variable set, it is a stdio MCP
// server (see TestMain), so the stdio path needs no external program.
const serverEnv = "STEPWISE_MCP_TEST_SERVER"

// secretEnv is set in the test process and must not reach a stdio server.
const secretEnv = "STEPWISE_MCP_TEST_SECRET"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		if err := newServer(nil).Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Setenv(secretEnv, "hunter2")
	os.Exit(m.Run())
}

type addArgs struct {
	A int `json:"a" jsonschema:"first addend"`
	B int `json:"b" jsonschema:"second addend"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// newServer builds the test server; calls counts the tool handler runs.
func newServer(calls *atomic.Int64) *sdk.Server {
	count := func() {
		if calls != nil {
			calls.Add(1)
		}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds two integers."},
		func(ctx context.Context, req *sdk.CallToolRequest, a addArgs) (*sdk.CallToolResult, addOut, error) {
			count()
			return nil, addOut{Sum: a.A + a.B}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			count()
			return nil, nil, errors.New("disk on fire")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "ns.key", Description: "Returns the idempotency key and an env variable."},
		func(ctx context.Context, req *sdk.CallToolRequest, a struct {
			Env string `json:"env,omitempty"`
		}) (*sdk.CallToolResult, any, error) {
			count()
			key, _ := req.Params.Meta["stepwise.run/idempotency-key"].(string)
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "key=" + key},
				&sdk.TextContent{Text: a.Env + "=" + os.Getenv(a.Env)},
			}}, nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "mixed", Description: "Text and an image.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			count()
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a chart:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
			}}, nil
		})
	// The client cannot resolve this schema (a remote $ref), so it leaves
	// validation to the server, which refuses with a JSON-RPC error.
	s.AddTool(&sdk.Tool{Name: "strict", Description: "Refuses its arguments.", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"x": map[string]any{"$ref": "https://schemas.example.com/x.json"}},
	}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		count()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `"x" must be a widget`}
	})
	s.AddTool(&sdk.Tool{Name: "internal", Description: "Fails inside the server.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			count()
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "database unavailable"}
		})
	s.AddTool(&sdk.Tool{Name: "crash", Description: "Kills a stdio server.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if os.Getenv(serverEnv) == "1" {
				os.Exit(3)
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "not a subprocess"}}}, nil
		})
	return s
}
