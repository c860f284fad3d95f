package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// maxBody bounds the body of a unary response.
const maxBody = 64 << 20

// maxBlocks bounds the content block index a stream may use.
const maxBlocks = 1 << 12

// stream reads the event stream of raw, yields a partial response per
// event that carries a delta, then the final response once the stream
// has ended after messageStop. It owns raw.Body.
func (m *Model) stream(ctx, callCtx context.Context, raw *http.Response, model string, yield func(*llm.Response, error) bool) {
	defer raw.Body.Close()
	fr := &frameReader{r: raw.Body}
	acc := accumulator{model: model}
	var readErr error
	for {
		msg, err := fr.next()
		if callCtx.Err() != nil {
			break // stop at once; reported below
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
		p, err := acc.event(msg)
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
	switch {
	case errors.Is(readErr, errFrame):
		yield(nil, badChunk(readErr))
	case !acc.stopped:
		yield(nil, llm.Truncated("messageStop", readErr))
	default:
		// metadata, with the usage, follows messageStop; a stream cut
		// between them is complete but for the token counts.
		yield(acc.final(), nil)
	}
}

// unary reads the single response of converse. It owns raw.Body.
func (m *Model) unary(ctx, callCtx context.Context, raw *http.Response, model string, yield func(*llm.Response, error) bool) {
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
	var r converseResponse
	if err := json.Unmarshal(data, &r); err != nil {
		yield(nil, badChunk(fmt.Errorf("response %.200q: %w", data, err)))
		return
	}
	acc := accumulator{model: model}
	if msg := r.Output.Message; msg != nil {
		for _, b := range msg.Content {
			switch {
			case b.Text != nil:
				acc.content.WriteString(*b.Text)
			case b.ToolUse != nil:
				acc.calls = append(acc.calls, call{id: b.ToolUse.ToolUseID, name: b.ToolUse.Name, args: b.ToolUse.Input})
			case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
				acc.reasoning.WriteString(b.ReasoningContent.ReasoningText.Text)
			}
		}
	}
	acc.stop, acc.usage = r.StopReason, r.Usage
	yield(acc.final(), nil)
}

// accumulator assembles the final message from the events of a stream.
type accumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	slots     map[int]int // content block index → position in calls
	calls     []call
	model     string // the model id called
	stop      string
	stopped   bool
	usage     usage
}

// call is a toolUse block being streamed.
type call struct {
	id, name string
	args     []byte
}

// event folds one message in and returns the partial response it amounts
// to, or nil when it carries no delta.
func (a *accumulator) event(msg *message) (*llm.Response, error) {
	switch msg.headers[":message-type"] {
	case "event":
	case "exception":
		return nil, exceptionError(msg.headers[":exception-type"], msg.payload)
	case "error":
		return nil, exceptionError(msg.headers[":error-code"], []byte(fmt.Sprintf(`{"message":%q}`, msg.headers[":error-message"])))
	default:
		return nil, badChunk(fmt.Errorf("%w: message type %q", errFrame, msg.headers[":message-type"]))
	}
	var e streamEvent
	if err := json.Unmarshal(msg.payload, &e); err != nil {
		return nil, badChunk(fmt.Errorf("%s payload %.200q: %w", msg.headers[":event-type"], msg.payload, err))
	}
	if e.ContentBlockIndex < 0 || e.ContentBlockIndex >= maxBlocks {
		return nil, badChunk(fmt.Errorf("content block index %d out of range", e.ContentBlockIndex))
	}
	switch msg.headers[":event-type"] {
	case "contentBlockStart":
		if tu := e.Start.ToolUse; tu != nil {
			if a.slots == nil {
				a.slots = map[int]int{}
			}
			slot := len(a.calls)
			a.slots[e.ContentBlockIndex] = slot
			a.calls = append(a.calls, call{id: tu.ToolUseID, name: tu.Name})
			return &llm.Response{Partial: true, ToolCallDeltas: []llm.ToolCallDelta{{Index: slot, ID: tu.ToolUseID, Name: tu.Name}}}, nil
		}
	case "contentBlockDelta":
		d := &e.Delta
		switch {
		case d.Text != nil && *d.Text != "":
			a.content.WriteString(*d.Text)
			return &llm.Response{Partial: true, Content: *d.Text}, nil
		case d.ReasoningContent != nil && d.ReasoningContent.Text != "":
			a.reasoning.WriteString(d.ReasoningContent.Text)
			return &llm.Response{Partial: true, Reasoning: d.ReasoningContent.Text}, nil
		case d.ToolUse != nil:
			slot, ok := a.slots[e.ContentBlockIndex]
			if !ok {
				return nil, badChunk(fmt.Errorf("toolUse delta for content block %d, which is no toolUse", e.ContentBlockIndex))
			}
			if d.ToolUse.Input == "" {
				return nil, nil
			}
			a.calls[slot].args = append(a.calls[slot].args, d.ToolUse.Input...)
			return &llm.Response{Partial: true, ToolCallDeltas: []llm.ToolCallDelta{{Index: slot, Arguments: d.ToolUse.Input}}}, nil
		}
	case "messageStop":
		a.stop, a.stopped = e.StopReason, true
	case "metadata":
		if e.Usage != nil {
			a.usage = *e.Usage
		}
	}
	// messageStart and contentBlockStop carry nothing to show.
	return nil, nil
}

// final returns the whole message. InputTokens counts every prompt token,
// read from the cache, written to it or neither, as OpenAI's prompt_tokens
// does; the API's inputTokens counts only the last kind.
func (a *accumulator) final() *llm.Response {
	u := &a.usage
	r := &llm.Response{
		Content:   a.content.String(),
		Reasoning: a.reasoning.String(),
		Usage: llm.Usage{
			InputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens,
			OutputTokens: u.OutputTokens,
			CachedTokens: u.CacheReadInputTokens,
		},
		FinishReason: a.stop,
		Model:        a.model,
	}
	if len(a.calls) > 0 {
		r.ToolCalls = make([]steptype.ToolCall, len(a.calls))
		for i, c := range a.calls {
			r.ToolCalls[i] = steptype.ToolCall{ID: c.id, Name: c.name, Arguments: arguments(c.args)}
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

// badChunk is the error of a message that breaks the framing or carries
// broken JSON: transient, since that comes from proxies and overloaded
// servers, not from the request.
func badChunk(err error) *llm.Error {
	return &llm.Error{Class: steptype.ErrorTransient, Code: "bad_chunk", Message: "malformed event stream: " + err.Error(), Err: err}
}
