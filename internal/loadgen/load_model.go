package loadgen

import (
	"context"
	"encoding/json"
	"iter"
	"math/rand/v2"
	"strconv"
	"time"
	"unsafe"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

var loadToolDef = llm.ToolDef{Name: "noop", Description: "Does nothing.", Parameters: json.RawMessage(`{"type":"object"}`)}

// loadModel is the model of Run: each call streams deltas whose text is
// the time they were produced ("t<unix nanoseconds>|"), so a subscriber can
// measure delivery latency, each after a delay of latency ±50%; every call
// but the last asks for the noop tool.
type loadModel struct {
	turns, deltas int
	latency       time.Duration
}

// Name implements llm.Model.
func (m *loadModel) Name() string { return "load:stamp" }

// Generate implements llm.Model.
func (m *loadModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		p := 0
		for _, msg := range req.Messages {
			if msg.Role == steptype.RoleAssistant {
				p++
			}
		}
		text := make([]byte, 0, m.deltas*21)
		// The partial responses are one, reused: the engine copies a
		// delta's text out of it before yield returns.
		part := &llm.Response{Partial: true}
		done := ctx.Done()
		for range m.deltas {
			// Real streams are not phase-locked: jitter each delay by ±50%.
			// A plain sleep parks the goroutine on its timer alone (no
			// channel, no select): the load generator's own cost is not
			// what the benchmark measures. Cancellation is seen within
			// one delay.
			time.Sleep(m.latency/2 + rand.N(m.latency))
			select {
			case <-done:
				yield(nil, ctx.Err())
				return
			default:
			}
			start := len(text)
			text = strconv.AppendInt(append(text, 't'), time.Now().UnixNano(), 10)
			text = append(text, '|')
			// The stamp's bytes in text are never written again (text
			// only grows, and a larger array leaves this one as it is):
			// the delta's string is a view of them, not a copy per delta.
			part.Content = unsafe.String(&text[start], len(text)-start)
			if !yield(part, nil) {
				return
			}
		}
		final := &llm.Response{Content: string(text), FinishReason: "stop", Usage: llm.Usage{InputTokens: 10, OutputTokens: int64(m.deltas)}}
		if p < m.turns-1 {
			final.FinishReason = "tool_calls"
			final.ToolCalls = []steptype.ToolCall{{ID: "c" + strconv.Itoa(p), Name: "noop", Arguments: json.RawMessage(`{}`)}}
		}
		yield(final, nil)
	}
}
