package openai

import (
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// emptySchema is sent for a tool without parameters: every compatible
// server accepts it, not all accept a missing "parameters".
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// params converts req to a chat completion request body. Invalid input is a
// permanent *llm.Error: retrying the same request cannot help.
func (m *Model) params(req *llm.Request) (*chatRequest, error) {
	if req == nil {
		return nil, badRequest("nil request")
	}
	p := &chatRequest{Model: m.cfg.Model, Stream: true, StreamOptions: streamOptions{IncludeUsage: true}}
	if req.Model != "" {
		p.Model = req.Model
	}
	p.Messages = make([]chatMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		p.Messages = append(p.Messages, chatMessage{Role: "system", Content: &req.System})
	}
	for i := range req.Messages {
		msg, err := message(&req.Messages[i])
		if err != nil {
			return nil, badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
		p.Messages = append(p.Messages, msg)
	}

	for _, t := range req.Tools {
		if t.Name == "" {
			return nil, badRequest("tool without a name")
		}
		// Raw, so the schema keeps its key order (a map would sort it).
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return nil, badRequest(fmt.Sprintf("tool %q: parameters are not valid JSON", t.Name))
		}
		p.Tools = append(p.Tools, chatTool{Type: "function",
			Function: functionDecl{Name: t.Name, Description: t.Description, Parameters: schema}})
	}

	p.Temperature = req.Temperature
	switch {
	case req.MaxTokens < 0:
		return nil, badRequest(fmt.Sprintf("negative MaxTokens %d", req.MaxTokens))
	case m.maxCompletion:
		p.MaxCompletionTokens = req.MaxTokens
	default:
		p.MaxTokens = req.MaxTokens
	}
	return p, nil
}

// message converts one context message. Reasoning is not sent back: most
// servers reject or ignore it in input messages.
func message(msg *llm.Message) (chatMessage, error) {
	content := msg.Content
	switch msg.Role {
	case steptype.RoleSystem, steptype.RoleUser:
		return chatMessage{Role: string(msg.Role), Content: &content}, nil
	case steptype.RoleTool:
		if msg.ToolCallID == "" {
			return chatMessage{}, fmt.Errorf("tool message without tool_call_id")
		}
		return chatMessage{Role: "tool", Content: &content, ToolCallID: msg.ToolCallID}, nil
	case steptype.RoleAssistant:
		a := chatMessage{Role: "assistant"}
		if msg.Content != "" || len(msg.ToolCalls) == 0 {
			a.Content = &content
		}
		for _, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return chatMessage{}, fmt.Errorf("tool call without id or name")
			}
			args := string(tc.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, toolCall{ID: tc.ID, Type: "function",
				Function: toolFunction{Name: tc.Name, Arguments: args}})
		}
		return a, nil
	default:
		return chatMessage{}, fmt.Errorf("role %q has no chat completion equivalent", msg.Role)
	}
}

// badRequest is the error of a request this package refuses to send.
func badRequest(msg string) *llm.Error {
	return &llm.Error{Class: steptype.ErrorPermanent, Code: "bad_request", Message: "stepwise: openai: " + msg}
}
