package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/tool"
)

// IdempotencyKeyMeta is the _meta key under which each tools/call request
// carries the call's idempotency key, for servers that can use it.
const IdempotencyKeyMeta = "stepwise.run/idempotency-key"

// Tools lists the server's tools (all pages) as Stepwise tools. Each keeps
// the server's description and input schema; its name is ToolPrefix plus
// the server's name, with characters other than letters, digits, '_' and
// '-' replaced by '_' and cut to 64 characters. Call Tools again after the
// server's tool list changes.
func (c *Client) Tools(ctx context.Context) ([]tool.Tool, error) {
	s, err := c.getSession(ctx)
	if err != nil {
		return nil, err
	}
	var tools []tool.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			if ctx.Err() == nil && serverError(err) == nil {
				c.broken(s)
				err = tool.Transient(err)
			}
			return nil, fmt.Errorf("mcp %s: list tools: %w", c.cfg.Name, err)
		}
		mt, err := c.newTool(t)
		if err != nil {
			return nil, err
		}
		tools = append(tools, mt)
	}
	return tools, nil
}

func (c *Client) newTool(t *sdk.Tool) (*mcpTool, error) {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		return nil, fmt.Errorf("mcp %s: tool %q: bad input schema: %v", c.cfg.Name, t.Name, err)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	mt := &mcpTool{
		client: c,
		remote: t.Name,
		def:    llm.ToolDef{Name: toolName(c.cfg.ToolPrefix, t.Name), Description: desc, Parameters: schema},
	}
	// A schema this side cannot resolve (a remote $ref, say) is left to
	// the server to enforce.
	mt.validator, _ = tool.NewValidator(schema)
	return mt, nil
}

// toolName makes a provider-safe tool name.
func toolName(prefix, name string) string {
	b := []byte(prefix + name)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// mcpTool is one tool of an MCP server.
type mcpTool struct {
	client    *Client
	remote    string // the server's name for the tool
	def       llm.ToolDef
	validator *tool.Validator // nil if the schema could not be resolved
}

// Definition returns the server's description and input schema under the
// local name.
func (t *mcpTool) Definition() llm.ToolDef { return t.def }

// Call validates the arguments, then calls the tool on the server.
func (t *mcpTool) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	args := tool.NormalizeArgs(c.Arguments)
	if t.validator != nil {
		if err := t.validator.Validate(args); err != nil {
			return tool.ErrorResult(err), nil
		}
	}
	s, err := t.client.getSession(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, tool.Permanent(err)
		}
		return nil, tool.Transient(err)
	}
	params := &sdk.CallToolParams{Name: t.remote, Arguments: args}
	if c.IdempotencyKey != "" {
		params.Meta = sdk.Meta{IdempotencyKeyMeta: c.IdempotencyKey}
	}
	if t.client.cfg.Elicitation {
		return t.callElicitable(ctx, s, params, c.Answers)
	}
	res, err := s.CallTool(ctx, params)
	if err != nil {
		return t.callError(ctx, s, err)
	}
	return convertResult(res)
}

// callError sorts a failed call: a JSON-RPC error from the server is its
// answer (bad parameters become an error result the model reads, others
// permanent errors); the caller's cancellation is returned as is; anything
// else is a transport failure, transient, after which the client
// reconnects on the next call.
func (t *mcpTool) callError(ctx context.Context, s *sdk.ClientSession, err error) (*tool.Result, error) {
	name := t.client.cfg.Name
	if ctx.Err() != nil {
		return nil, fmt.Errorf("mcp %s: call %s: %w", name, t.remote, ctx.Err())
	}
	if we := serverError(err); we != nil {
		if we.Code == jsonrpc.CodeInvalidParams {
			return tool.ErrorResult(fmt.Errorf("invalid arguments: %s", we.Message)), nil
		}
		return nil, tool.Permanent(fmt.Errorf("mcp %s: call %s: %w", name, t.remote, err))
	}
	t.client.broken(s)
	return nil, tool.Transient(fmt.Errorf("mcp %s: call %s: %w", name, t.remote, err))
}

// Codes the SDK uses for failures on this side of the connection, not for
// answers from the server (see go-sdk internal/jsonrpc2/wire.go).
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005 // "rejected by transport": not sent, or HTTP 429/5xx
)

// serverError returns the JSON-RPC error the server answered with, if err
// holds one, skipping the SDK's local transport errors.
func serverError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	var walk func(error)
	walk = func(e error) {
		if e == nil || found != nil {
			return
		}
		if we, ok := e.(*jsonrpc.Error); ok {
			switch we.Code {
			case codeClientClosing, codeServerClosing, codeRejected:
			default:
				found = we
				return
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return found
}

// convertResult renders an MCP result: Content is the text of its content
// blocks (placeholders for images, audio and links), or its structured
// content when it has no blocks; Output is its structured content
// (structuredContent) when it has one, else the whole result as JSON; each
// image block is also an attachment (stored beside the tool step).
func convertResult(res *sdk.CallToolResult) (*tool.Result, error) {
	if res.NeedsInput() {
		return &tool.Result{Content: "the server asked for user input, which this client does not support", IsError: true}, nil
	}
	var out []byte
	var err error
	if res.StructuredContent != nil {
		out, err = json.Marshal(res.StructuredContent)
	} else {
		out, err = json.Marshal(res)
	}
	if err != nil {
		return nil, tool.Permanent(fmt.Errorf("marshal MCP result: %w", err))
	}
	parts := make([]string, 0, len(res.Content))
	var atts []tool.Attachment
	for _, c := range res.Content {
		parts = append(parts, contentText(c))
		if img, ok := c.(*sdk.ImageContent); ok && len(img.Data) > 0 {
			atts = append(atts, tool.Attachment{ContentType: img.MIMEType, Kind: "image", Data: img.Data})
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			text = string(b)
		}
	}
	return &tool.Result{Content: text, Output: out, IsError: res.IsError, Attachments: atts}, nil
}

func contentText(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.ResourceLink:
		return fmt.Sprintf("[resource link %s %q]", c.URI, c.Name)
	case *sdk.EmbeddedResource:
		if c.Resource == nil {
			return "[resource]"
		}
		if c.Resource.Text != "" {
			return c.Resource.Text
		}
		return fmt.Sprintf("[resource %s %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob))
	}
	b, _ := json.Marshal(c)
	return string(b)
}
