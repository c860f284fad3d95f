// Package tool defines what an agent can call: the Tool interface, typed Go
// function tools (New[Args, Result]) whose JSON Schema is generated from the
// arguments struct and checked before every call, and error helpers.
//
// Built-in tools live in tool/builtin, MCP server tools in tool/mcp.
package tool

import (
	"context"
	"encoding/json"

	"github.com/stepwise-run/stepwise/llm"
)

// Tool is something a model can call.
type Tool interface {
	// Definition is the name, description and argument schema shown to the model.
	Definition() llm.ToolDef
	// Call executes one call. A returned error becomes a tool result the
	// model can read (with IsError set); mark it Transient to have the
	// engine retry it.
	Call(ctx context.Context, c *Call) (*Result, error)
}

// Call is one invocation of a tool.
type Call struct {
	ID        string          // the model's tool-call id
	Name      string          // the tool name
	Arguments json.RawMessage // the arguments object as the model sent it
	// IdempotencyKey is stable across re-executions of the same call after a
	// crash (derived from run id and tool-call id): use it to make side
	// effects safe to repeat.
	IdempotencyKey string
	SessionID      string
	RunID          string
	Attempt        int // 1-based
	// Answers are the answers to the input this call asked for before
	// (an InputNeeded error), oldest first; nil on a first call.
	Answers []json.RawMessage
}

// Result is what a tool returns. The engine owns a returned Result and
// everything it references (Output, State, the attachments' data): it
// becomes the recorded step without a copy, so a tool must not change or
// reuse those buffers after Call returns.
type Result struct {
	// Content is the text the model sees. When empty, Output is shown.
	Content string
	// Output is the structured result (any JSON).
	Output json.RawMessage
	// IsError marks a result that reports a failure to the model.
	IsError bool
	// State, when set, updates the run's custom state (a JSON object):
	// each key is combined by the agent's reducer for it (Agent.Reducers),
	// else merged. Parallel calls' updates are applied one after another,
	// in the order their steps commit.
	State json.RawMessage
	// Attachments are files the call produced (screenshots, images,
	// documents). The engine stores them as attachments of the call's tool
	// step (when the store keeps observations) and flags the step; the
	// model does not see them.
	Attachments []Attachment
	// Metadata, when set, is recorded in the metadata of the call's tool
	// step (e.g. the worker that served the call).
	Metadata map[string]any
}

// Attachment is a file produced by a tool call.
type Attachment struct {
	// Name is the file name shown; default "attachment-N" with an
	// extension from ContentType.
	Name string
	// ContentType is the MIME type; default sniffed from Data.
	ContentType string
	// Kind is "screenshot", "image" or "file"; default "image" for images,
	// "file" otherwise.
	Kind string
	// Data is the content; empty attachments are ignored.
	Data []byte
}
