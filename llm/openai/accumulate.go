package openai

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// accumulator assembles the final message from the chunks of a stream.
type accumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []callBuilder
	usage     llm.Usage
	finish    string
	model     string
}

// callBuilder is one tool call being streamed.
type callBuilder struct {
	index int64 // the server's index
	id    string
	name  string
	args  []byte
}

// add folds chunk c in and returns the partial response it amounts to, or
// nil when it carries no delta (role, finish and usage chunks).
func (a *accumulator) add(c *chunk) *llm.Response {
	if c.Model != "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = llm.Usage{
			InputTokens:     c.Usage.PromptTokens,
			OutputTokens:    c.Usage.CompletionTokens,
			CachedTokens:    c.Usage.PromptTokensDetails.CachedTokens,
			ReasoningTokens: c.Usage.CompletionTokensDetails.ReasoningTokens,
		}
	}
	var p *llm.Response
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever requested
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
		d := &ch.Delta
		text := d.Content + d.Refusal
		reasoning := reasoningDelta(d)
		if text == "" && reasoning == "" && len(d.ToolCalls) == 0 {
			continue
		}
		if p == nil {
			p = &llm.Response{Partial: true}
		}
		p.Content += text
		p.Reasoning += reasoning
		a.content.WriteString(text)
		a.reasoning.WriteString(reasoning)
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			slot := a.slot(tc.Index, tc.ID)
			b := &a.calls[slot]
			delta := llm.ToolCallDelta{Index: slot, Arguments: tc.Function.Arguments}
			// The id and name come whole, once; some servers repeat them.
			if b.id == "" && tc.ID != "" {
				b.id, delta.ID = tc.ID, tc.ID
			}
			if b.name == "" && tc.Function.Name != "" {
				b.name, delta.Name = tc.Function.Name, tc.Function.Name
			}
			b.args = append(b.args, tc.Function.Arguments...)
			p.ToolCallDeltas = append(p.ToolCallDeltas, delta)
		}
	}
	return p
}

// slot returns the position of the call a fragment with the server's index
// and id belongs to, starting a new call when needed. A fragment whose id
// differs from the call at its index starts a new call: some servers send
// every parallel call at index 0.
func (a *accumulator) slot(index int64, id string) int {
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].index != index {
			continue
		}
		if id != "" && a.calls[i].id != "" && id != a.calls[i].id {
			break
		}
		return i
	}
	a.calls = append(a.calls, callBuilder{index: index})
	return len(a.calls) - 1
}

// final returns the whole message.
func (a *accumulator) final() *llm.Response {
	r := &llm.Response{
		Content:      a.content.String(),
		Reasoning:    a.reasoning.String(),
		Usage:        a.usage,
		FinishReason: a.finish,
		Model:        a.model,
	}
	if len(a.calls) > 0 {
		r.ToolCalls = make([]steptype.ToolCall, len(a.calls))
		for i := range a.calls {
			b := &a.calls[i]
			r.ToolCalls[i] = steptype.ToolCall{ID: b.id, Name: b.name, Arguments: arguments(b.args)}
		}
	}
	return r
}

// arguments returns streamed tool-call arguments as JSON: "{}" when empty,
// the text itself when it is valid JSON, and otherwise the text as a JSON
// string, so that a model's broken JSON still reaches the tool (which
// rejects it with an error the model can read) and the step stays storable.
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

// reasoningDelta returns the reasoning text of a delta: "reasoning_content"
// or "reasoning", whichever is a non-empty string.
func reasoningDelta(d *delta) string {
	for _, raw := range [...]json.RawMessage{d.ReasoningContent, d.Reasoning} {
		if len(raw) < 2 || raw[0] != '"' {
			continue // absent, null or not a string
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}
