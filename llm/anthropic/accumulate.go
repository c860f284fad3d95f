package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// maxBlocks bounds the content block index a stream may use.
const maxBlocks = 1 << 12

// accumulator assembles the final message from the events of a stream.
type accumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	blocks    []block // by content block index
	calls     []call  // tool_use blocks, in order
	model     string
	stop      string
	// Token counts; the API reports them cumulatively, so the largest wins.
	input, cacheRead, cacheWrite, output, thinking int64
}

// block is a content block of the message.
type block struct {
	kind string // "text", "thinking", "tool_use", …
	slot int    // position in calls, for tool_use
}

// call is a tool_use block being streamed.
type call struct {
	id, name string
	start    string // the input of content_block_start, "{}" when streamed
	args     []byte
}

// add folds event e in and returns the partial response it amounts to, or
// nil when it carries no delta.
func (a *accumulator) add(e *event) (*llm.Response, error) {
	switch e.Type {
	case "message_start":
		a.model = e.Message.Model
		u := &e.Message.Usage
		a.counts(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens, u.OutputTokensDetails.ThinkingTokens)
	case "message_delta":
		if e.Delta.StopReason != "" {
			a.stop = e.Delta.StopReason
		}
		u := &e.Usage
		a.counts(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens, u.OutputTokensDetails.ThinkingTokens)
	case "content_block_start":
		if e.Index < 0 || e.Index >= maxBlocks {
			return nil, fmt.Errorf("content block index %d out of range", e.Index)
		}
		for int(e.Index) >= len(a.blocks) {
			a.blocks = append(a.blocks, block{})
		}
		cb := &e.ContentBlock
		b := &a.blocks[e.Index]
		b.kind = cb.Type
		switch cb.Type {
		case "text":
			return a.text(cb.Text), nil
		case "thinking":
			return a.think(cb.Thinking), nil
		case "tool_use":
			b.slot = len(a.calls)
			a.calls = append(a.calls, call{id: cb.ID, name: cb.Name, start: string(cb.Input)})
			return &llm.Response{Partial: true, ToolCallDeltas: []llm.ToolCallDelta{{Index: b.slot, ID: cb.ID, Name: cb.Name}}}, nil
		}
	case "content_block_delta":
		switch d := &e.Delta; d.Type {
		case "text_delta":
			return a.text(d.Text), nil
		case "thinking_delta":
			return a.think(d.Thinking), nil
		case "input_json_delta":
			if e.Index < 0 || int(e.Index) >= len(a.blocks) || a.blocks[e.Index].kind != "tool_use" {
				return nil, fmt.Errorf("input_json_delta for content block %d, which is no tool_use", e.Index)
			}
			if d.PartialJSON == "" {
				return nil, nil
			}
			slot := a.blocks[e.Index].slot
			a.calls[slot].args = append(a.calls[slot].args, d.PartialJSON...)
			return &llm.Response{Partial: true, ToolCallDeltas: []llm.ToolCallDelta{{Index: slot, Arguments: d.PartialJSON}}}, nil
		}
		// signature_delta and citations_delta have nothing to show.
	}
	return nil, nil
}

func (a *accumulator) text(s string) *llm.Response {
	if s == "" {
		return nil
	}
	a.content.WriteString(s)
	return &llm.Response{Partial: true, Content: s}
}

func (a *accumulator) think(s string) *llm.Response {
	if s == "" {
		return nil
	}
	a.reasoning.WriteString(s)
	return &llm.Response{Partial: true, Reasoning: s}
}

func (a *accumulator) counts(input, cacheRead, cacheWrite, output, thinking int64) {
	a.input = max(a.input, input)
	a.cacheRead = max(a.cacheRead, cacheRead)
	a.cacheWrite = max(a.cacheWrite, cacheWrite)
	a.output = max(a.output, output)
	a.thinking = max(a.thinking, thinking)
}

// final returns the whole message. InputTokens counts every prompt token,
// read from the cache, written to it or neither, as OpenAI's prompt_tokens
// does; the API's input_tokens counts only the last kind.
func (a *accumulator) final() *llm.Response {
	r := &llm.Response{
		Content:   a.content.String(),
		Reasoning: a.reasoning.String(),
		Usage: llm.Usage{
			InputTokens:     a.input + a.cacheRead + a.cacheWrite,
			OutputTokens:    a.output,
			CachedTokens:    a.cacheRead,
			ReasoningTokens: a.thinking,
		},
		FinishReason: a.stop,
		Model:        a.model,
	}
	if len(a.calls) > 0 {
		r.ToolCalls = make([]steptype.ToolCall, len(a.calls))
		for i := range a.calls {
			c := &a.calls[i]
			args := c.args
			if len(bytes.TrimSpace(args)) == 0 && c.start != "" {
				args = []byte(c.start) // a server that sent the input whole
			}
			r.ToolCalls[i] = steptype.ToolCall{ID: c.id, Name: c.name, Arguments: arguments(args)}
		}
	}
	return r
}

// arguments returns streamed tool input as JSON: "{}" when empty, the text
// itself when it is valid JSON, and otherwise the text as a JSON string, so
// that broken input still reaches the tool (which rejects it with an error
// the model can read) and the step stays storable.
func arguments(s []byte) json.RawMessage {
	s = bytes.TrimSpace(s)
	if len(s) == 0 {
		return json.RawMessage("{}")
	}
	if json.Valid(s) {
		return s
	}
	b, _ := json.Marshal(string(s))
	return b
}
