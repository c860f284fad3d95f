package tool

import "encoding/json"

// InputNeeded is the error a tool returns when a call cannot finish without
// a person's answer (an MCP server's elicitation, say). The engine records
// a waiting input request with its prompt and schema and parks the run;
// when the request is answered, it makes the same call again (same
// arguments, same IdempotencyKey) with the answers so far in Call.Answers,
// in the order they were asked. A call may ask several times, one request
// after another.
type InputNeeded struct {
	// Prompt is the question shown to the person. Required.
	Prompt string
	// Schema is the JSON Schema the answer must match; nil accepts text.
	Schema json.RawMessage
	// Context is shown with the request (e.g. which server asks).
	Context map[string]any
}

// Error returns the prompt.
func (e *InputNeeded) Error() string { return "stepwise: tool call needs input: " + e.Prompt }
