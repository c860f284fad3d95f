// Command mcpimage is an MCP server (stdio) for the binary tests: its tool
// "screenshot" answers a text and a PNG image, as a browser's MCP server
// does.
package main

import (
	"context"
	"log"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// png is a 1×1 transparent PNG.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func main() {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcpimage", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "screenshot", Description: "Screenshot of the page.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "the page:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: png},
			}}, nil
		})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
