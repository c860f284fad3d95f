package bedrock

import "encoding/json"

// The Converse API wire format, as much of it as this package sends and
// reads. Unknown fields are ignored.

// converseRequest is the body of POST /model/{modelId}/converse and
// /converse-stream.
type converseRequest struct {
	Messages        []turn           `json:"messages"`
	System          []systemBlock    `json:"system,omitempty"`
	InferenceConfig *inferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *toolConfig      `json:"toolConfig,omitempty"`
}

type turn struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type systemBlock struct {
	Text string `json:"text"`
}

// block is a ContentBlock: exactly one member is set.
type block struct {
	Text             *string           `json:"text,omitempty"`
	ToolUse          *toolUse          `json:"toolUse,omitempty"`
	ToolResult       *toolResult       `json:"toolResult,omitempty"`
	ReasoningContent *reasoningContent `json:"reasoningContent,omitempty"`
	CachePoint       *cachePoint       `json:"cachePoint,omitempty"`
}

// cachePoint marks the end of a prefix for the model to cache.
type cachePoint struct {
	Type string `json:"type"`
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []toolResultContent `json:"content"`
}

type toolResultContent struct {
	Text *string         `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

type reasoningContent struct {
	ReasoningText *struct {
		Text string `json:"text"`
	} `json:"reasoningText,omitempty"`
}

type inferenceConfig struct {
	MaxTokens   int      `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

type toolConfig struct {
	Tools []toolEntry `json:"tools"`
}

type toolEntry struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

// converseResponse is the answer of /converse.
type converseResponse struct {
	Output struct {
		Message *turn `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      usage  `json:"usage"`
}

// usage counts tokens; inputTokens leaves out the cache reads and writes.
type usage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}

// streamEvent is the payload of any converse-stream event: messageStart,
// contentBlockStart, contentBlockDelta, contentBlockStop, messageStop,
// metadata, or an exception's {"message": …}.
type streamEvent struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
		ReasoningContent *struct {
			Text string `json:"text"`
		} `json:"reasoningContent"`
	} `json:"delta"`
	StopReason string `json:"stopReason"`
	Usage      *usage `json:"usage"`
	Message    string `json:"message"`
}
