package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// emptySchema is sent for a tool without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// params converts req to Messages API parameters. Invalid input is a
// permanent *llm.Error: retrying the same request cannot help.
func (m *Model) params(req *llm.Request) (*messageRequest, error) {
	if req == nil {
		return nil, badRequest("nil request")
	}
	p := &messageRequest{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens, Stream: true}
	if req.Model != "" {
		p.Model = req.Model
	}
	switch {
	case req.MaxTokens < 0:
		return nil, badRequest(fmt.Sprintf("negative MaxTokens %d", req.MaxTokens))
	case req.MaxTokens > 0:
		p.MaxTokens = req.MaxTokens
	}

	system := []string{}
	if req.System != "" {
		system = append(system, req.System)
	}
	var b builder
	for i := range req.Messages {
		msg := &req.Messages[i]
		if msg.Role == steptype.RoleSystem {
			// The Messages API has no system turns: they join the prompt.
			if msg.Content != "" {
				system = append(system, msg.Content)
			}
			continue
		}
		if err := b.add(msg); err != nil {
			return nil, badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
	}
	p.Messages = b.msgs
	if p.Messages == nil {
		p.Messages = []turn{}
	}
	if len(system) > 0 {
		p.System = []contentPart{{Type: "text", Text: strings.Join(system, "\n\n")}}
	}

	for _, t := range req.Tools {
		if t.Name == "" {
			return nil, badRequest("tool without a name")
		}
		// Raw, so the schema keeps its key order and every keyword.
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return nil, badRequest(fmt.Sprintf("tool %q: parameters are not valid JSON", t.Name))
		}
		p.Tools = append(p.Tools, toolDecl{Name: t.Name, Description: t.Description, InputSchema: schema})
	}

	if m.cfg.ThinkingBudget > 0 {
		if p.MaxTokens <= m.cfg.ThinkingBudget {
			return nil, badRequest(fmt.Sprintf("MaxTokens %d must exceed the thinking budget %d", p.MaxTokens, m.cfg.ThinkingBudget))
		}
		p.Thinking = &thinking{Type: "enabled", BudgetTokens: m.cfg.ThinkingBudget}
	} else {
		p.Temperature = req.Temperature
	}
	if m.cfg.PromptCaching {
		p.CacheControl = &cacheControl{Type: "ephemeral"}
	}
	return p, nil
}

// builder assembles the alternating user and assistant turns: consecutive
// messages of one side merge into one turn, so that the results of
// parallel tool calls travel together in one user message.
type builder struct {
	msgs []turn
}

func (b *builder) add(msg *llm.Message) error {
	var role string
	var blocks []contentPart
	switch msg.Role {
	case steptype.RoleUser:
		role = "user"
		if msg.Content != "" { // the API refuses empty text blocks
			blocks = append(blocks, contentPart{Type: "text", Text: msg.Content})
		}
	case steptype.RoleTool:
		if msg.ToolCallID == "" {
			return fmt.Errorf("tool message without tool_call_id")
		}
		role = "user"
		r := contentPart{Type: "tool_result", ToolUseID: msg.ToolCallID}
		if msg.Content != "" {
			r.Content = []contentPart{{Type: "text", Text: msg.Content}}
		}
		blocks = append(blocks, r)
	case steptype.RoleAssistant:
		role = "assistant"
		if msg.Content != "" {
			blocks = append(blocks, contentPart{Type: "text", Text: msg.Content})
		}
		for _, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return fmt.Errorf("tool call without id or name")
			}
			blocks = append(blocks, contentPart{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
		}
	default:
		return fmt.Errorf("role %q has no Messages API equivalent", msg.Role)
	}
	if len(blocks) == 0 {
		return nil // nothing to say: an empty turn would be refused
	}
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == role {
		b.msgs[n-1].Content = append(b.msgs[n-1].Content, blocks...)
		return nil
	}
	b.msgs = append(b.msgs, turn{Role: role, Content: blocks})
	return nil
}

// toolInput returns recorded tool-call arguments as the JSON object the API
// requires for tool_use input; anything else (no arguments, or a model's
// broken JSON kept as a string) becomes {}.
func toolInput(args json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(args); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage("{}")
}

// badRequest is the error of a request this package refuses to send.
func badRequest(msg string) *llm.Error {
	return &llm.Error{Class: steptype.ErrorPermanent, Code: "bad_request", Message: "stepwise: anthropic: " + msg}
}
