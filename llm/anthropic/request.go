package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// emptySchema is sent for a tool without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// params converts req to Messages API parameters. Invalid input is a
// permanent *llm.Error: retrying the same request cannot help.
func (m *Model) params(req *llm.Request) (sdk.MessageNewParams, error) {
	var p sdk.MessageNewParams
	if req == nil {
		return p, badRequest("nil request")
	}
	p.Model = sdk.Model(m.cfg.Model)
	if req.Model != "" {
		p.Model = sdk.Model(req.Model)
	}
	p.MaxTokens = int64(m.cfg.MaxTokens)
	switch {
	case req.MaxTokens < 0:
		return p, badRequest(fmt.Sprintf("negative MaxTokens %d", req.MaxTokens))
	case req.MaxTokens > 0:
		p.MaxTokens = int64(req.MaxTokens)
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
			return p, badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
	}
	p.Messages = b.msgs
	if len(system) > 0 {
		p.System = []sdk.TextBlockParam{{Text: strings.Join(system, "\n\n")}}
	}

	for _, t := range req.Tools {
		if t.Name == "" {
			return p, badRequest("tool without a name")
		}
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return p, badRequest(fmt.Sprintf("tool %q: parameters are not valid JSON", t.Name))
		}
		tool := sdk.ToolParam{
			Name: t.Name,
			// Raw, so the schema keeps its key order and every keyword.
			InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}

	if m.cfg.ThinkingBudget > 0 {
		if p.MaxTokens <= int64(m.cfg.ThinkingBudget) {
			return p, badRequest(fmt.Sprintf("MaxTokens %d must exceed the thinking budget %d", p.MaxTokens, m.cfg.ThinkingBudget))
		}
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(m.cfg.ThinkingBudget))
	} else if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	if m.cfg.PromptCaching {
		p.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return p, nil
}

// builder assembles the alternating user and assistant turns: consecutive
// messages of one side merge into one turn, so that the results of
// parallel tool calls travel together in one user message.
type builder struct {
	msgs []sdk.MessageParam
}

func (b *builder) add(msg *llm.Message) error {
	var role sdk.MessageParamRole
	var blocks []sdk.ContentBlockParamUnion
	switch msg.Role {
	case steptype.RoleUser:
		role = sdk.MessageParamRoleUser
		if msg.Content != "" { // the API refuses empty text blocks
			blocks = append(blocks, sdk.NewTextBlock(msg.Content))
		}
	case steptype.RoleTool:
		if msg.ToolCallID == "" {
			return fmt.Errorf("tool message without tool_call_id")
		}
		role = sdk.MessageParamRoleUser
		r := sdk.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
		if msg.Content != "" {
			r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: msg.Content}}}
		}
		blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &r})
	case steptype.RoleAssistant:
		role = sdk.MessageParamRoleAssistant
		if msg.Content != "" {
			blocks = append(blocks, sdk.NewTextBlock(msg.Content))
		}
		for _, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return fmt.Errorf("tool call without id or name")
			}
			blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
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
	b.msgs = append(b.msgs, sdk.MessageParam{Role: role, Content: blocks})
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
