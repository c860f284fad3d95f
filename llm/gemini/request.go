package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// skipSignature is the thought signature Google documents for function
// calls whose signature is not at hand (here: calls replayed from steps,
// which keep no signature, after the Model that received them is gone), so
// that models that validate signatures accept the turn.
const skipSignature = "skip_thought_signature_validator"

// params converts req to a generateContent body and the model id to call.
// Invalid input is a permanent *llm.Error: retrying cannot help.
func (m *Model) params(req *llm.Request) (*generateRequest, string, error) {
	if req == nil {
		return nil, "", badRequest("nil request")
	}
	model := m.cfg.Model
	if req.Model != "" {
		model = strings.TrimPrefix(req.Model, "models/")
	}
	p := &generateRequest{}
	gc := generationConfig{Temperature: req.Temperature, MaxOutputTokens: m.cfg.MaxTokens}
	switch {
	case req.MaxTokens < 0:
		return nil, "", badRequest(fmt.Sprintf("negative MaxTokens %d", req.MaxTokens))
	case req.MaxTokens > 0:
		gc.MaxOutputTokens = req.MaxTokens
	}
	if m.cfg.IncludeThoughts || m.cfg.ThinkingBudget != nil {
		gc.ThinkingConfig = &thinkingConfig{IncludeThoughts: m.cfg.IncludeThoughts, ThinkingBudget: m.cfg.ThinkingBudget}
	}
	if gc != (generationConfig{}) {
		p.GenerationConfig = &gc
	}

	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	b := builder{names: map[string]string{}, sigs: &m.sigs}
	for i := range req.Messages {
		msg := &req.Messages[i]
		if msg.Role == steptype.RoleSystem {
			// Gemini has no system turns: they join the instruction.
			if msg.Content != "" {
				system = append(system, msg.Content)
			}
			continue
		}
		if err := b.add(msg); err != nil {
			return nil, "", badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
	}
	p.Contents = b.turns
	if p.Contents == nil {
		p.Contents = []content{}
	}
	if len(system) > 0 {
		p.SystemInstruction = &content{Parts: []part{{Text: strings.Join(system, "\n\n")}}}
	}

	if len(req.Tools) > 0 {
		decls := make([]functionDecl, 0, len(req.Tools))
		for _, t := range req.Tools {
			if t.Name == "" {
				return nil, "", badRequest("tool without a name")
			}
			if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
				return nil, "", badRequest(fmt.Sprintf("tool %q: parameters are not valid JSON", t.Name))
			}
			decls = append(decls, functionDecl{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters})
		}
		p.Tools = []toolDecl{{FunctionDeclarations: decls}}
	}
	return p, model, nil
}

// builder assembles the user and model turns: consecutive messages of one
// side merge into one turn, so that the responses to parallel function
// calls travel together, as the API requires.
type builder struct {
	turns []content
	names map[string]string // tool call id → function name
	sigs  *signatures
}

func (b *builder) add(msg *llm.Message) error {
	var role string
	var parts []part
	switch msg.Role {
	case steptype.RoleUser:
		role = "user"
		if msg.Content != "" {
			parts = append(parts, part{Text: msg.Content})
		}
	case steptype.RoleTool:
		if msg.ToolCallID == "" {
			return fmt.Errorf("tool message without tool_call_id")
		}
		name := msg.ToolName
		if name == "" {
			name = b.names[msg.ToolCallID]
		}
		if name == "" {
			return fmt.Errorf("tool message %q answers no known function call", msg.ToolCallID)
		}
		role = "user"
		parts = append(parts, part{FunctionResponse: &functionResponse{ID: msg.ToolCallID, Name: name, Response: toolOutput(msg.Content)}})
	case steptype.RoleAssistant:
		role = "model"
		if msg.Content != "" {
			parts = append(parts, part{Text: msg.Content})
		}
		for i, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return fmt.Errorf("tool call without id or name")
			}
			b.names[tc.ID] = tc.Name
			p := part{FunctionCall: &functionCall{ID: tc.ID, Name: tc.Name, Args: toolInput(tc.Arguments)}}
			switch sig := b.sigs.get(tc.ID); {
			case sig != "":
				p.ThoughtSignature = sig // as the model sent it
			case i == 0:
				p.ThoughtSignature = skipSignature
			}
			parts = append(parts, p)
		}
	default:
		return fmt.Errorf("role %q has no Gemini equivalent", msg.Role)
	}
	if len(parts) == 0 {
		return nil // an empty turn would be refused
	}
	if n := len(b.turns); n > 0 && b.turns[n-1].Role == role {
		b.turns[n-1].Parts = append(b.turns[n-1].Parts, parts...)
		return nil
	}
	b.turns = append(b.turns, content{Role: role, Parts: parts})
	return nil
}

// toolInput returns recorded tool-call arguments as the JSON object the
// API requires for functionCall.args; anything else becomes {}.
func toolInput(args json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(args); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage("{}")
}

// toolOutput returns a tool result as the object functionResponse.response
// must be: a JSON object as it is, anything else under "output", the key
// Google documents for a function's output.
func toolOutput(s string) json.RawMessage {
	if t := bytes.TrimSpace([]byte(s)); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	b, _ := json.Marshal(map[string]string{"output": s})
	return b
}

// badRequest is the error of a request this package refuses to send.
func badRequest(msg string) *llm.Error {
	return &llm.Error{Class: steptype.ErrorPermanent, Code: "bad_request", Message: "stepwise: gemini: " + msg}
}
