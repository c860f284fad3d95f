package openai

import (
	"encoding/json"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// emptySchema is sent for a tool without parameters: every compatible
// server accepts it, not all accept a missing "parameters".
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// params converts req to chat completion parameters. Invalid input is a
// permanent *llm.Error: retrying the same request cannot help.
func (m *Model) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	var p sdk.ChatCompletionNewParams
	if req == nil {
		return p, badRequest("nil request")
	}
	p.Model = m.cfg.Model
	if req.Model != "" {
		p.Model = req.Model
	}
	p.StreamOptions.IncludeUsage = sdk.Bool(true)

	p.Messages = make([]sdk.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for i := range req.Messages {
		msg, err := message(&req.Messages[i])
		if err != nil {
			return p, badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
		p.Messages = append(p.Messages, msg)
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
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		// Raw, so the schema keeps its key order (a map would sort it).
		fn.SetExtraFields(map[string]any{"parameters": schema})
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}

	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	switch {
	case req.MaxTokens < 0:
		return p, badRequest(fmt.Sprintf("negative MaxTokens %d", req.MaxTokens))
	case req.MaxTokens > 0 && m.maxCompletion:
		p.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
	case req.MaxTokens > 0:
		p.MaxTokens = sdk.Int(int64(req.MaxTokens))
	}
	return p, nil
}

// message converts one context message. Reasoning is not sent back: most
// servers reject or ignore it in input messages.
func message(msg *llm.Message) (sdk.ChatCompletionMessageParamUnion, error) {
	switch msg.Role {
	case steptype.RoleSystem:
		return sdk.SystemMessage(msg.Content), nil
	case steptype.RoleUser:
		return sdk.UserMessage(msg.Content), nil
	case steptype.RoleTool:
		if msg.ToolCallID == "" {
			return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message without tool_call_id")
		}
		return sdk.ToolMessage(msg.Content, msg.ToolCallID), nil
	case steptype.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		if msg.Content != "" || len(msg.ToolCalls) == 0 {
			a.Content.OfString = sdk.String(msg.Content)
		}
		for _, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call without id or name")
			}
			args := string(tc.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
				},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	default:
		return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("role %q has no chat completion equivalent", msg.Role)
	}
}

// badRequest is the error of a request this package refuses to send.
func badRequest(msg string) *llm.Error {
	return &llm.Error{Class: steptype.ErrorPermanent, Code: "bad_request", Message: "stepwise: openai: " + msg}
}
