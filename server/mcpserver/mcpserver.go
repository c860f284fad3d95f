// Package mcpserver serves an engine as a Model Context Protocol server, so
// that a coding agent or an IDE can inspect and drive runs: tools list and
// search sessions, read steps, render a trace, search past steps, list and
// answer pending requests, start runs, fork and retry; each session is a
// resource (stepwise://sessions/{id} and …/trace).
//
// New returns the server of the official Go SDK; `stepwise mcp` runs it on
// stdio, and `stepwise serve` mounts Handler at /mcp (streamable HTTP)
// behind the server's bearer tokens:
//
//	srv, err := mcpserver.New(mcpserver.Config{Engine: eng})
//	if err != nil { ... }
//	err = srv.Run(ctx, &mcp.StdioTransport{})
//
// A tool's failure — an unknown id, a bad argument, a run that cannot be
// forked there — is an MCP tool error (isError, with the engine's message);
// arguments that do not match a tool's input schema are refused by the SDK
// before the engine sees them.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/recall"
)

// Config configures a server. Only Engine is required.
type Config struct {
	// Engine serves the tools. The caller executes its runs (Engine.Start,
	// or server.New, which starts it): run_start only queues a run.
	Engine *stepwise.Engine
	// Embedder embeds the queries of steps_search: the embedder the steps
	// were embedded with. Default recall.DefaultEmbedder().
	Embedder recall.Embedder
	// Version is the server's version in the MCP handshake. Default "dev".
	Version string
	// MaxBodyBytes limits the request bodies of Handler; larger ones get
	// 413. Default the SDK's (4 MiB).
	MaxBodyBytes int64
}

// ErrNoEngine is returned by New without Config.Engine.
var ErrNoEngine = errors.New("stepwise: mcp server: an engine is required (Config.Engine)")

// New returns an MCP server of cfg.Engine with every tool and resource
// template registered.
func New(cfg Config) (*sdk.Server, error) {
	if cfg.Engine == nil {
		return nil, ErrNoEngine
	}
	if cfg.Embedder == nil {
		cfg.Embedder = recall.DefaultEmbedder()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "stepwise", Title: "Stepwise", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions: "Stepwise keeps the step log of durable LLM agent runs. Sessions hold steps (sequence 1..N); " +
			"runs execute agents in sessions and may wait for human input (inputs_list, input_answer). " +
			"Read a session with steps_read or trace_render, or as the resource stepwise://sessions/{id}.",
	})
	h := &handlers{eng: cfg.Engine, emb: cfg.Embedder}
	h.addTools(srv)
	h.addResources(srv)
	return srv, nil
}

// Handler returns the streamable HTTP handler of one server of cfg, for
// every MCP session. It does not authenticate: mount it behind the
// server's tokens (server.Server does).
func Handler(cfg Config) (http.Handler, error) {
	srv, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		// The server's own tokens guard the route; a proxy in front may
		// give another Host than loopback's.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        cfg.MaxBodyBytes,
	}), nil
}

type handlers struct {
	eng *stepwise.Engine
	emb recall.Embedder
}

// rawAny makes a json.RawMessage field any JSON value in an inferred
// schema (not the byte array its Go type suggests).
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
}}

// schemaFor is the JSON schema of T with schemaOptions; it panics on a type
// that has none (a programming error caught by every test).
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](schemaOptions)
	if err != nil {
		panic(err)
	}
	return s
}

// addTool registers a typed tool whose output schema is inferred with
// schemaOptions.
func addTool[In, Out any](srv *sdk.Server, name, title, desc string, readOnly bool, h func(context.Context, In) (Out, error)) {
	t := &sdk.Tool{Name: name, Title: title, Description: desc, OutputSchema: schemaFor[Out](),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: readOnly}}
	sdk.AddTool(srv, t, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		out, err := h(ctx, in)
		return nil, out, err
	})
}

// toMap turns a value with its own JSON encoding (a step) into the object
// its JSON is.
func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
