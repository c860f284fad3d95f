package bedrock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// emptySchema is the input schema of a tool without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// params converts req to a Converse body and the model id to call.
// Invalid input is a permanent *llm.Error: retrying cannot help.
func (m *Model) params(req *llm.Request) (*converseRequest, string, error) {
	if req == nil {
		return nil, "", badRequest("nil request")
	}
	model := m.cfg.Model
	if req.Model != "" {
		model = req.Model
	}
	p := &converseRequest{}
	ic := inferenceConfig{MaxTokens: m.cfg.MaxTokens, Temperature: req.Temperature}
	switch {
	case req.MaxTokens < 0:
		return nil, "", badRequest(fmt.Sprintf("negative MaxTokens %d", req.MaxTokens))
	case req.MaxTokens > 0:
		ic.MaxTokens = req.MaxTokens
	}
	if ic != (inferenceConfig{}) {
		p.InferenceConfig = &ic
	}

	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	var b builder
	for i := range req.Messages {
		msg := &req.Messages[i]
		if msg.Role == steptype.RoleSystem {
			// Converse has no system turns: they join the system prompt.
			if msg.Content != "" {
				system = append(system, msg.Content)
			}
			continue
		}
		if err := b.add(msg); err != nil {
			return nil, "", badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
	}
	p.Messages = b.turns
	if p.Messages == nil {
		p.Messages = []turn{}
	}
	if n := len(p.Messages); n > 0 && m.cfg.PromptCaching {
		last := &p.Messages[n-1]
		last.Content = append(last.Content, block{CachePoint: &cachePoint{Type: "default"}})
	}
	if len(system) > 0 {
		p.System = []systemBlock{{Text: strings.Join(system, "\n\n")}}
	}

	if len(req.Tools) > 0 {
		p.ToolConfig = &toolConfig{}
		for _, t := range req.Tools {
			if t.Name == "" {
				return nil, "", badRequest("tool without a name")
			}
			spec := toolSpec{Name: t.Name, Description: t.Description}
			spec.InputSchema.JSON = t.Parameters
			if len(t.Parameters) == 0 {
				spec.InputSchema.JSON = emptySchema
			} else if !json.Valid(t.Parameters) {
				return nil, "", badRequest(fmt.Sprintf("tool %q: parameters are not valid JSON", t.Name))
			}
			p.ToolConfig.Tools = append(p.ToolConfig.Tools, toolEntry{ToolSpec: spec})
		}
	}
	return p, model, nil
}

// builder assembles alternating user and assistant turns: consecutive
// messages of one side merge into one turn, so the results of parallel
// tool calls travel together in one user message.
type builder struct {
	turns []turn
}

func (b *builder) add(msg *llm.Message) error {
	var role string
	var blocks []block
	switch msg.Role {
	case steptype.RoleUser:
		role = "user"
		if msg.Content != "" { // the API refuses blank text blocks
			blocks = append(blocks, block{Text: &msg.Content})
		}
	case steptype.RoleTool:
		if msg.ToolCallID == "" {
			return fmt.Errorf("tool message without tool_call_id")
		}
		role = "user"
		blocks = append(blocks, block{ToolResult: &toolResult{ToolUseID: msg.ToolCallID, Content: []toolResultContent{resultContent(msg.Content)}}})
	case steptype.RoleAssistant:
		role = "assistant"
		if msg.Content != "" {
			blocks = append(blocks, block{Text: &msg.Content})
		}
		for _, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return fmt.Errorf("tool call without id or name")
			}
			blocks = append(blocks, block{ToolUse: &toolUse{ToolUseID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)}})
		}
	default:
		return fmt.Errorf("role %q has no Converse equivalent", msg.Role)
	}
	if len(blocks) == 0 {
		return nil // an empty turn would be refused
	}
	if n := len(b.turns); n > 0 && b.turns[n-1].Role == role {
		b.turns[n-1].Content = append(b.turns[n-1].Content, blocks...)
		return nil
	}
	b.turns = append(b.turns, turn{Role: role, Content: blocks})
	return nil
}

// resultContent is a tool result as a toolResult content block: text, or
// an empty JSON object for no output (blank text is refused).
func resultContent(s string) toolResultContent {
	if s == "" {
		return toolResultContent{JSON: json.RawMessage("{}")}
	}
	return toolResultContent{Text: &s}
}

// toolInput returns recorded tool-call arguments as the JSON object the
// API requires for toolUse input; anything else becomes {}.
func toolInput(args json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(args); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage("{}")
}

// badRequest is the error of a request this package refuses to send.
func badRequest(msg string) *llm.Error {
	return &llm.Error{Class: steptype.ErrorPermanent, Code: "bad_request", Message: "stepwise: bedrock: " + msg}
}
