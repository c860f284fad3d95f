package runexec

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// errNoFinal fails a model call whose stream ended without its final
// response.
var errNoFinal = &llm.Error{Class: steptype.ErrorTransient, Code: "stream_truncated", Message: "model stream ended without a final response"}

// ModelCall is what an llm step allocates for its model call: the request
// and the stream's state, in one allocation.
type ModelCall struct {
	Req llm.Request
	ms  modelStream
}

// modelBuffers is what the model calls of an execution reuse.
type modelBuffers struct {
	boxes [2]struct {
		v   string
		box any
	} // see boxed
	priced struct {
		model string
		price llm.Price
		ok    bool
		set   bool
	} // see price
}

// CallModel calls model m with call.Req for the llm step named name,
// streaming its deltas, and records the final response on step: content,
// reasoning, tool calls (each with an id and arguments), times, tokens,
// the response's model and finish reason, and the cost by prices.
func (c *Core) CallModel(ctx context.Context, m llm.Model, call *ModelCall, name string, step *steptype.Step, prices llm.PriceTable) error {
	// The stream's callback is a method of one struct: a range-over-func
	// body would move each variable it shares to the heap on its own.
	ms := &call.ms
	ms.c, ms.name, ms.step, ms.start = c, name, step, c.Env.Now()
	m.Generate(ctx, &call.Req)(ms.yield)
	if ms.err != nil {
		return ms.err
	}
	final, start := ms.final, ms.start
	if final == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errNoFinal
	}
	step.Content, step.Reasoning, step.ToolCalls = final.Content, final.Reasoning, final.ToolCalls
	for i := range step.ToolCalls {
		tc := &step.ToolCalls[i]
		if tc.ID == "" {
			tc.ID = "call_" + strconv.Itoa(i) + "_" + step.ID[len(step.ID)-8:]
		}
		if len(tc.Arguments) == 0 {
			tc.Arguments = json.RawMessage("{}")
		}
	}
	mt := &step.Metrics
	mt.FinishedAt = c.Env.Now()
	mt.Duration = mt.FinishedAt.Sub(mt.StartedAt)
	if mt.FirstTokenLatency == 0 {
		mt.FirstTokenLatency = mt.FinishedAt.Sub(start)
	}
	mt.InputTokens, mt.OutputTokens = final.Usage.InputTokens, final.Usage.OutputTokens
	mt.CachedTokens, mt.ReasoningTokens = final.Usage.CachedTokens, final.Usage.ReasoningTokens
	if final.Model != "" {
		step.Metadata = map[string]any{"response_model": c.boxed(0, final.Model), "finish_reason": c.boxed(1, final.FinishReason)}
	}
	if price, ok := c.price(prices, m.Name()); ok {
		mt.Cost = price.Cost(mt.InputTokens, mt.OutputTokens, mt.CachedTokens)
	}
	return nil
}

// boxed returns v as an interface value, the one of the previous call
// with the same slot when v is unchanged: a string in an interface is
// immutable, so steps can share it, and a model that answers with the same
// model name and finish reason every time costs no allocation for them.
func (c *Core) boxed(slot int, v string) any {
	b := &c.model.boxes[slot]
	if b.v != v || b.box == nil {
		b.v, b.box = v, v
	}
	return b.box
}

// price is prices.Lookup(model), the last answer kept: a model name that
// matches no entry costs a walk of the whole table (the longest prefix),
// and the table does not change while runs execute.
func (c *Core) price(prices llm.PriceTable, model string) (llm.Price, bool) {
	if pc := &c.model.priced; !pc.set || pc.model != model {
		pc.price, pc.ok = prices.Lookup(model)
		pc.model, pc.set = model, true
	}
	return c.model.priced.price, c.model.priced.ok
}

// modelStream receives the responses of one model call.
type modelStream struct {
	c     *Core
	name  string
	step  *steptype.Step
	start time.Time
	final *llm.Response
	err   error
}

func (m *modelStream) yield(resp *llm.Response, err error) bool {
	if m.err != nil {
		return false
	}
	if err != nil {
		m.err = err
		return false
	}
	if !resp.Partial {
		m.final = resp
		return true
	}
	// at: the first token's time, read once for its latency and for the
	// event of its first delta (the same instant); later deltas read theirs.
	var at time.Time
	if m.step.Metrics.FirstTokenLatency == 0 {
		at = m.c.Env.Now()
		m.step.Metrics.FirstTokenLatency = at.Sub(m.start)
	}
	if resp.Content != "" || resp.Reasoning != "" {
		m.c.EmitDeltaAt(m.name, steptype.Delta{Content: resp.Content, Reasoning: resp.Reasoning}, at)
		at = time.Time{}
	}
	for i := range resp.ToolCallDeltas {
		m.c.EmitDeltaAt(m.name, steptype.Delta{ToolCall: &resp.ToolCallDeltas[i]}, at)
		at = time.Time{}
	}
	return true
}
