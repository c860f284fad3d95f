package anthropic

import "encoding/json"

// The Messages API wire format, as much of it as this package sends and
// reads. Unknown fields of an event are ignored.

// messageRequest is the body of POST /v1/messages.
type messageRequest struct {
	Model        string        `json:"model"`
	MaxTokens    int           `json:"max_tokens"`
	System       []contentPart `json:"system,omitempty"`
	Messages     []turn        `json:"messages"`
	Tools        []toolDecl    `json:"tools,omitempty"`
	Thinking     *thinking     `json:"thinking,omitempty"`
	Temperature  *float64      `json:"temperature,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
	Stream       bool          `json:"stream"`
}

// turn is one user or assistant message.
type turn struct {
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

// contentPart is a content block of the kinds this package sends: text,
// tool_use and tool_result.
type contentPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []contentPart   `json:"content,omitempty"`
}

type toolDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type cacheControl struct {
	Type string `json:"type"`
}

// event is one streamed event: message_start, content_block_start,
// content_block_delta, message_delta, message_stop, error, …
type event struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		Model string `json:"model"`
		Usage usage  `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage usage `json:"usage"`
}

// usage is a token count; the API reports them cumulatively.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	OutputTokensDetails      struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}
