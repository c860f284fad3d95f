package gemini

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/internal/sse"
	"github.com/stepwise-run/stepwise/steptype"
)

// maxBody bounds the body of a unary response.
const maxBody = 64 << 20

// stream reads the server-sent events of raw (one GenerateContentResponse
// per event), yields a partial response per chunk that carries a delta,
// then the final response once the stream ends after a finish reason. It
// owns raw.Body.
func (m *Model) stream(ctx, callCtx context.Context, raw *http.Response, yield func(*llm.Response, error) bool) {
	dec := sse.NewDecoder(raw.Body)
	defer dec.Close()

	var acc accumulator
	for dec.Next() {
		if callCtx.Err() != nil {
			break // stop at once; reported below
		}
		data := bytes.TrimSpace(dec.Event().Data)
		if len(data) == 0 {
			continue
		}
		p, err := acc.chunk(data)
		if err != nil {
			yield(nil, err)
			return
		}
		if p != nil && !yield(p, nil) {
			return
		}
	}
	if err := m.cancelled(ctx, callCtx); err != nil {
		yield(nil, err)
		return
	}
	if acc.finish == "" {
		// A stream has no end marker: the chunk with the finish reason
		// is the last one, and a stream that ends without it is cut off.
		yield(nil, llm.Truncated("a finish reason", dec.Err()))
		return
	}
	m.remember(&acc)
	yield(acc.result())
}

// unary reads the single response of generateContent and yields it as the
// final response. It owns raw.Body.
func (m *Model) unary(ctx, callCtx context.Context, raw *http.Response, yield func(*llm.Response, error) bool) {
	defer raw.Body.Close()
	data, err := io.ReadAll(io.LimitReader(raw.Body, maxBody))
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		yield(nil, cerr)
		return
	}
	if err != nil {
		yield(nil, llm.Truncated("the end of the response", err))
		return
	}
	var acc accumulator
	if _, err := acc.chunk(bytes.TrimSpace(data)); err != nil {
		yield(nil, err)
		return
	}
	if acc.finish == "" {
		yield(nil, llm.Truncated("a finish reason", nil))
		return
	}
	m.remember(&acc)
	yield(acc.result())
}

// remember keeps the thought signatures of a turn's calls.
func (m *Model) remember(acc *accumulator) {
	for id, sig := range acc.sigs {
		m.sigs.put(id, sig)
	}
}

// accumulator assembles the final message from the chunks of a stream.
type accumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []steptype.ToolCall
	sigs      map[string]string // call id → thought signature
	model     string
	finish    string
	usage     usageMetadata
}

// chunk folds one response chunk in and returns the partial response it
// amounts to, or nil when it carries no delta.
func (a *accumulator) chunk(data []byte) (*llm.Response, error) {
	var r generateResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, badChunk(data, err)
	}
	if r.Error != nil {
		return nil, statusError(r.Error)
	}
	if r.ModelVersion != "" {
		a.model = r.ModelVersion
	}
	if u := r.UsageMetadata; u != nil {
		a.usage.PromptTokenCount = max(a.usage.PromptTokenCount, u.PromptTokenCount)
		a.usage.CandidatesTokenCount = max(a.usage.CandidatesTokenCount, u.CandidatesTokenCount)
		a.usage.CachedContentTokenCount = max(a.usage.CachedContentTokenCount, u.CachedContentTokenCount)
		a.usage.ThoughtsTokenCount = max(a.usage.ThoughtsTokenCount, u.ThoughtsTokenCount)
		a.usage.ToolUsePromptTokenCount = max(a.usage.ToolUsePromptTokenCount, u.ToolUsePromptTokenCount)
	}
	if len(r.Candidates) == 0 {
		if f := r.PromptFeedback; f != nil && f.BlockReason != "" {
			return nil, &llm.Error{Class: steptype.ErrorPermanent, Code: "blocked", Message: "prompt blocked: " + f.BlockReason}
		}
		return nil, nil // a usage-only chunk
	}
	c := &r.Candidates[0] // one candidate is asked for
	if c.FinishReason != "" {
		a.finish = c.FinishReason
	}
	var p llm.Response
	for i := range c.Content.Parts {
		pt := &c.Content.Parts[i]
		switch {
		case pt.FunctionCall != nil:
			fc := pt.FunctionCall
			if fc.Name == "" {
				return nil, badChunk(data, fmt.Errorf("function call without a name"))
			}
			id := fc.ID
			if id == "" {
				id = newCallID()
			}
			args := arguments(fc.Args)
			if pt.ThoughtSignature != "" {
				if a.sigs == nil {
					a.sigs = map[string]string{}
				}
				a.sigs[id] = pt.ThoughtSignature
			}
			p.ToolCallDeltas = append(p.ToolCallDeltas, llm.ToolCallDelta{Index: len(a.calls), ID: id, Name: fc.Name, Arguments: string(args)})
			a.calls = append(a.calls, steptype.ToolCall{ID: id, Name: fc.Name, Arguments: args})
		case pt.Thought:
			a.reasoning.WriteString(pt.Text)
			p.Reasoning += pt.Text
		default:
			a.content.WriteString(pt.Text)
			p.Content += pt.Text
		}
	}
	if p.Content == "" && p.Reasoning == "" && len(p.ToolCallDeltas) == 0 {
		return nil, nil
	}
	p.Partial = true
	return &p, nil
}

// result returns the final response, or the error of a turn the model
// botched: a function call it could not write (finish reason
// MALFORMED_FUNCTION_CALL, no call) is transient, since another attempt
// usually succeeds.
func (a *accumulator) result() (*llm.Response, error) {
	if a.finish == "MALFORMED_FUNCTION_CALL" && len(a.calls) == 0 {
		return nil, &llm.Error{Class: steptype.ErrorTransient, Code: "malformed_function_call", Message: "the model produced a function call it could not write (finish reason MALFORMED_FUNCTION_CALL)"}
	}
	return a.final(), nil
}

// final returns the whole message. OutputTokens counts the thinking tokens
// too (they are billed as output), as OpenAI's completion_tokens does;
// InputTokens counts cached and tool-use prompt tokens.
func (a *accumulator) final() *llm.Response {
	u := &a.usage
	return &llm.Response{
		Content:   a.content.String(),
		Reasoning: a.reasoning.String(),
		ToolCalls: a.calls,
		Usage: llm.Usage{
			InputTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
			OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
			CachedTokens:    u.CachedContentTokenCount,
			ReasoningTokens: u.ThoughtsTokenCount,
		},
		FinishReason: a.finish,
		Model:        a.model,
	}
}

// arguments returns a function call's args as a JSON object, "{}" when
// absent.
func arguments(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	return t
}

// newCallID returns an id for a function call the API sent without one
// (the Gemini API usually does), unique across a session.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// badChunk is the error of a chunk that is not the JSON it should be:
// transient, since broken JSON comes from proxies and overloaded servers,
// not from the request.
func badChunk(data []byte, err error) *llm.Error {
	const limit = 200
	if len(data) > limit {
		data = append(data[:limit:limit], "…"...)
	}
	return &llm.Error{Class: steptype.ErrorTransient, Code: "bad_chunk", Message: fmt.Sprintf("malformed stream chunk %q: %v", data, err), Err: err}
}
