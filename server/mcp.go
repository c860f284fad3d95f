package server

import (
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise/server/mcpserver"
)

// mcpPath is the streamable HTTP endpoint of the MCP server (package
// mcpserver): POST carries JSON-RPC messages, GET opens the stream of the
// server's messages, DELETE ends an MCP session.
const mcpPath = "/mcp"

// registerMCP mounts the MCP server of the engine at /mcp, behind the
// server's tokens like every route.
func (s *Server) registerMCP() error {
	h, err := mcpserver.Handler(mcpserver.Config{Engine: s.eng, Embedder: s.cfg.SearchEmbedder, MaxBodyBytes: s.cfg.MaxBodyBytes})
	if err != nil {
		return fmt.Errorf("stepwise server: mcp: %w", err)
	}
	serve := func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		s.handle(m, mcpPath, serve)
	}
	return nil
}

// mcpOps document /mcp: its bodies are MCP's JSON-RPC messages, described
// by the MCP specification rather than by this document.
func mcpOps() []apiOp {
	return []apiOp{
		{method: "POST", path: mcpPath, id: "mcpPost", body: "JSONRPCMessage", status: 200, resp: "JSONRPCMessage", errors: []int{401},
			summary: "MCP (streamable HTTP): send a JSON-RPC request, notification or response to Stepwise's MCP server; requests are answered as JSON or an SSE stream (see docs/protocols.md)"},
		{method: "GET", path: mcpPath, id: "mcpStream", status: 200, stream: true, errors: []int{401},
			summary: "MCP (streamable HTTP): the SSE stream of the server's messages to an MCP session (Mcp-Session-Id header)"},
		{method: "DELETE", path: mcpPath, id: "mcpEnd", status: 204, errors: []int{401},
			summary: "MCP (streamable HTTP): end an MCP session (Mcp-Session-Id header)"},
	}
}

func mcpSchemas() obj {
	return obj{"JSONRPCMessage": obj{"type": "object", "additionalProperties": true,
		"description": "a JSON-RPC 2.0 message of the Model Context Protocol: jsonrpc, id, method, params, result or error"}}
}
