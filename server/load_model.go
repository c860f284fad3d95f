package server

import (
	"context"
	"encoding/json"
	"iter"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

var loadToolDef = llm.ToolDef{Name: "noop", Description: "Does nothing.", Parameters: json.RawMessage(`{"type":"object"}`)}

// loadModel is the model of RunLoad: each call streams deltas whose text is
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
		var text strings.Builder
		t := time.NewTimer(m.latency)
		defer t.Stop()
		for range m.deltas {
			// Real streams are not phase-locked: jitter each delay by ±50%.
			t.Reset(m.latency/2 + rand.N(m.latency))
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-t.C:
			}
			d := "t" + strconv.FormatInt(time.Now().UnixNano(), 10) + "|"
			text.WriteString(d)
			if !yield(&llm.Response{Partial: true, Content: d}, nil) {
				return
			}
		}
		final := &llm.Response{Content: text.String(), FinishReason: "stop", Usage: llm.Usage{InputTokens: 10, OutputTokens: int64(m.deltas)}}
		if p < m.turns-1 {
			final.FinishReason = "tool_calls"
			final.ToolCalls = []steptype.ToolCall{{ID: "c" + strconv.Itoa(p), Name: "noop", Arguments: json.RawMessage(`{}`)}}
		}
		yield(final, nil)
	}
}
