package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/mcp"
)

// ExampleConnect turns the tools of an MCP server (here one running in the
// same process) into Stepwise tools.
func ExampleConnect() {
	ctx := context.Background()
	server := sdk.NewServer(&sdk.Implementation{Name: "greeter", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, req *sdk.CallToolRequest, a struct {
			Name string `json:"name"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Hello, " + a.Name + "!"}}}, nil, nil
		})
	serverSide, clientSide := sdk.NewInMemoryTransports()
	if _, err := server.Connect(ctx, serverSide, nil); err != nil {
		panic(err)
	}

	// With a real server: mcp.ServerConfig{Command: "npx", Args: []string{...}}
	// or mcp.ServerConfig{URL: "https://example.com/mcp"}.
	client, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "greeter", Transport: clientSide, ToolPrefix: "greeter_"})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	tools, err := client.Tools(ctx)
	if err != nil {
		panic(err)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		panic(err)
	}
	fmt.Println(set.Defs()[0].Name)

	res, _ := set.Call(ctx, &tool.Call{Name: "greeter_greet", Arguments: json.RawMessage(`{"name":"Ada"}`)})
	fmt.Println(res.Content)
	res, _ = set.Call(ctx, &tool.Call{Name: "greeter_greet", Arguments: json.RawMessage(`{}`)})
	fmt.Println(res.IsError, res.Content)
	// Output:
	// greeter_greet
	// Hello, Ada!
	// true invalid arguments: field "name" is required
}
