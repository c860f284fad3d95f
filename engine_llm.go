package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/stepwise-run/stepwise/internal/runexec"
	"strconv"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// errNoFinal is returned when a model stream ends without a final response.
var errNoFinal = &llm.Error{Class: steptype.ErrorTransient, Code: "stream_truncated", Message: "model stream ended without a final response"}

// request builds the model request of the next llm step from the in-memory
// context.
func (x *execution) request() *llm.Request {
	req := new(llm.Request)
	x.fillRequest(req)
	return req
}

// fillRequest makes the zero req the model request of the next llm step.
func (x *execution) fillRequest(req *llm.Request) {
	a := x.agent
	req.System, req.Messages, req.Temperature, req.MaxTokens = a.Instructions, x.Conv.Messages(), a.Temperature, a.MaxTokens
	if x.defs == nil {
		x.defs = x.toolDefs()
	}
	req.Tools = x.defs
}

// llmCall is what an llm step allocates for its model call: the request
// and the stream's state, in one allocation.
type llmCall struct {
	req llm.Request
	ms  modelStream
}

// llmStep is the built-in "llm" step: one model call, streamed as deltas,
// recorded as one llm step. Routes to "tools" when the model asked for tools.
func (x *execution) llmStep(ctx context.Context, s *Scope) (*Next, error) {
	model := x.agent.Model
	if model == nil {
		return nil, fmt.Errorf("stepwise: agent %q has no model", x.agent.Name)
	}
	// Calls still without a result will not get one from this run: the
	// model is called instead of the tools step.
	x.Conv.CloseCalls()
	call := new(llmCall)
	req := &call.req
	x.fillRequest(req)
	msgs, trim, err := x.window(ctx)
	if err != nil {
		return nil, err
	}
	if trim != nil {
		if err := x.Commit([]*Step{trim}, runexec.Update{}); err != nil {
			return nil, err
		}
	}
	req.Messages = msgs
	fp := x.fp.Request(x.Conv, model.Name(), req)
	step := s.step
	step.Kind, step.Role, step.Fingerprint = steptype.KindLLM, steptype.RoleAssistant, fp
	step.Metrics.Model = model.Name()
	if p, ok := model.(llm.Provider); ok {
		step.Metrics.Provider = p.Provider()
	}
	if rec := x.replay.takeLLM(fp); rec != nil {
		reuseRecorded(step, rec)
		return &Next{Step: x.afterLLM(step), record: step}, nil
	}
	if x.replay != nil {
		step.Replay = "live"
	}
	// The stream's callback is a method of one struct: a range-over-func
	// body would move each variable it shares to the heap on its own.
	ms := &call.ms
	ms.x, ms.name, ms.step, ms.start = x, s.name, step, x.e.now()
	x.observeModel(model, step).Generate(ctx, req)(ms.yield)
	if ms.err != nil {
		return nil, ms.err
	}
	final, start := ms.final, ms.start
	if final == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, errNoFinal
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
	m := &step.Metrics
	m.FinishedAt = x.e.now()
	m.Duration = m.FinishedAt.Sub(m.StartedAt)
	if m.FirstTokenLatency == 0 {
		m.FirstTokenLatency = m.FinishedAt.Sub(start)
	}
	m.InputTokens, m.OutputTokens = final.Usage.InputTokens, final.Usage.OutputTokens
	m.CachedTokens, m.ReasoningTokens = final.Usage.CachedTokens, final.Usage.ReasoningTokens
	if final.Model != "" {
		step.Metadata = map[string]any{"response_model": x.boxed(0, final.Model), "finish_reason": x.boxed(1, final.FinishReason)}
	}
	if price, ok := x.price(model.Name()); ok {
		m.Cost = price.Cost(m.InputTokens, m.OutputTokens, m.CachedTokens)
	}
	return x.builtinNext(StepLLM, Next{Step: x.afterLLM(step), record: step}), nil
}

// price is the engine's Prices.Lookup(model), the last answer kept: a
// model name that matches no entry costs a walk of the whole table (the
// longest prefix), and the table does not change while runs execute.
func (x *execution) price(model string) (Price, bool) {
	if pc := &x.buf.priced; !pc.set || pc.model != model {
		pc.price, pc.ok = x.e.cfg.Prices.Lookup(model)
		pc.model, pc.set = model, true
	}
	return x.buf.priced.price, x.buf.priced.ok
}

// modelStream receives the responses of one model call of llmStep.
type modelStream struct {
	x     *execution
	name  string
	step  *Step
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
		at = m.x.e.now()
		m.step.Metrics.FirstTokenLatency = at.Sub(m.start)
	}
	if resp.Content != "" || resp.Reasoning != "" {
		m.x.EmitDeltaAt(m.name, Delta{Content: resp.Content, Reasoning: resp.Reasoning}, at)
		at = time.Time{}
	}
	for i := range resp.ToolCallDeltas {
		m.x.EmitDeltaAt(m.name, Delta{ToolCall: &resp.ToolCallDeltas[i]}, at)
		at = time.Time{}
	}
	return true
}

func (x *execution) afterLLM(s *Step) string {
	if len(s.ToolCalls) > 0 {
		return StepTools
	}
	return x.agent.AfterLLM
}
