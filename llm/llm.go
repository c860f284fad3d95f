// Package llm is the tiny, streaming model interface of Stepwise and the
// types a provider speaks: requests built from step messages, streamed
// responses with partial chunks flagged, usage, and classified errors.
//
// Providers live in subpackages: llm/scripted (deterministic, file driven),
// llm/openai (any OpenAI-compatible server), llm/anthropic, llm/gemini,
// llm/bedrock (Amazon Bedrock's Converse API).
package llm

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/stepwise-run/stepwise/steptype"
)

// Model generates one assistant turn.
type Model interface {
	// Name is the model string, e.g. "openai:gpt-4o-mini" or "scripted:demo".
	Name() string
	// Generate streams the response to req.
	//
	// Contract: the sequence yields zero or more partial responses
	// (Partial=true, carrying only deltas) followed by exactly one final
	// response (Partial=false, carrying the whole message, usage and finish
	// reason). Each pair is a value or an error; an error ends the sequence.
	// Cancelling ctx stops the call and yields ctx's error. Breaking out of
	// the loop releases the underlying connection. No goroutine is started
	// before iteration begins.
	Generate(ctx context.Context, req *Request) iter.Seq2[*Response, error]
}

// Message is one message of the model context. It mirrors the message fields
// of a step one to one (zero conversion).
type Message struct {
	Role       steptype.Role       `json:"role"`
	Content    string              `json:"content,omitempty"`
	Reasoning  string              `json:"reasoning,omitempty"`
	ToolCalls  []steptype.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string              `json:"tool_call_id,omitempty"`
	ToolName   string              `json:"tool_name,omitempty"`
}

// MessageOf returns the model message of a step.
func MessageOf(s *steptype.Step) Message {
	return Message{Role: s.Role, Content: s.Content, Reasoning: s.Reasoning, ToolCalls: s.ToolCalls, ToolCallID: s.ToolCallID, ToolName: s.ToolName}
}

// ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments object
}

// Request is one model call.
type Request struct {
	Model       string    `json:"model,omitempty"` // provider-side model id; providers default to their own
	System      string    `json:"system,omitempty"`
	Messages    []Message `json:"messages"`
	Tools       []ToolDef `json:"tools,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
}

// Response is a streamed chunk (Partial) or the final message.
type Response struct {
	Partial bool `json:"partial,omitempty"`
	// Content and Reasoning are deltas when Partial, the whole text when final.
	Content   string `json:"content,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCallDeltas carry streamed tool-call fragments (Partial only).
	ToolCallDeltas []ToolCallDelta `json:"tool_call_deltas,omitempty"`
	// ToolCalls are the complete calls (final only).
	ToolCalls    []steptype.ToolCall `json:"tool_calls,omitempty"`
	Usage        Usage               `json:"usage,omitzero"`
	FinishReason string              `json:"finish_reason,omitempty"`
	Model        string              `json:"model,omitempty"` // model id reported by the provider
}

// ToolCallDelta is a fragment of a streamed tool call; Index identifies the
// call among parallel calls of one response. See steptype.ToolCallDelta.
type ToolCallDelta = steptype.ToolCallDelta

// Usage counts tokens of one call.
type Usage struct {
	InputTokens     int64 `json:"input_tokens,omitempty"`
	OutputTokens    int64 `json:"output_tokens,omitempty"`
	CachedTokens    int64 `json:"cached_tokens,omitempty"`
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
}

// Provider is implemented by models that can say which provider serves them
// ("openai", "anthropic", "gemini", "bedrock", "scripted"); used for
// metrics and telemetry.
type Provider interface {
	Provider() string
}

// ContextWindower is implemented by models that know the size of their
// context window in tokens (a provider configured with one); the engine
// derives an agent's default token budget from it.
type ContextWindower interface {
	ContextWindow() int
}
