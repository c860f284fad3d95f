package stepwise

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
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
	req.System, req.Messages, req.Temperature, req.MaxTokens = a.Instructions, x.conv.messages(), a.Temperature, a.MaxTokens
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
	x.conv.closeCalls()
	call := new(llmCall)
	req := &call.req
	x.fillRequest(req)
	msgs, trim, err := x.window(ctx)
	if err != nil {
		return nil, err
	}
	if trim != nil {
		if err := x.commit([]*Step{trim}, runUpdate{}); err != nil {
			return nil, err
		}
	}
	req.Messages = msgs
	fp := x.requestFingerprint(model.Name(), req)
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
	if pc := &x.priced; !pc.set || pc.model != model {
		pc.price, pc.ok = x.e.cfg.Prices.Lookup(model)
		pc.model, pc.set = model, true
	}
	return x.priced.price, x.priced.ok
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
		m.x.emitDeltaAt(m.name, Delta{Content: resp.Content, Reasoning: resp.Reasoning}, at)
		at = time.Time{}
	}
	for i := range resp.ToolCallDeltas {
		m.x.emitDeltaAt(m.name, Delta{ToolCall: &resp.ToolCallDeltas[i]}, at)
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

// requestFingerprint is the canonical hash of a model request: model name,
// system prompt, tools, parameters and the messages — the latter through the
// conversation's hash chain (canonical JSON of every message, chained), the
// trim point and the summary, so it costs O(1) in the history length.
func (x *execution) requestFingerprint(model string, req *llm.Request) string {
	if x.toolsHash == nil {
		th := sha256.New()
		enc := json.NewEncoder(th)
		for _, t := range req.Tools {
			_ = enc.Encode(t.Name)
			_ = enc.Encode(t.Description)
			_ = enc.Encode(canonicalJSON(t.Parameters))
		}
		x.toolsHash = th.Sum(nil)
	}
	// The hashed bytes are, in order: each of model, system prompt (then
	// the tools' hash), temperature, max tokens, (then the conversation's
	// head), trim point and summary as encoding/json writes it with a
	// trailing newline. The part before the head is the same for every
	// request of the execution: it is built once.
	fp := &x.fp
	if fp.prefix == nil || fp.model != model || fp.system != req.System || fp.maxTokens != req.MaxTokens ||
		(fp.temperature == nil) != (req.Temperature == nil) || fp.temperature != nil && *fp.temperature != *req.Temperature {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		_ = enc.Encode(model)
		_ = enc.Encode(req.System)
		b.Write(x.toolsHash)
		_ = enc.Encode(req.Temperature)
		_ = enc.Encode(req.MaxTokens)
		fp.prefix, fp.model, fp.system, fp.maxTokens = b.Bytes(), model, req.System, req.MaxTokens
		fp.temperature = nil
		if req.Temperature != nil {
			t := *req.Temperature
			fp.temperature = &t
		}
	}
	buf := append(fp.buf[:0], fp.prefix...)
	buf = append(buf, x.conv.headBytes()...)
	buf = strconv.AppendInt(buf, int64(x.conv.trimmed), 10)
	buf = append(buf, '\n')
	if x.conv.summary == "" {
		buf = append(buf, `""`+"\n"...)
	} else {
		s, _ := json.Marshal(x.conv.summary)
		buf = append(append(buf, s...), '\n')
	}
	fp.buf = buf
	return hex16(sha256.Sum256(buf))
}

// fingerprinter is what requestFingerprint keeps between requests.
type fingerprinter struct {
	prefix      []byte // the encoded model, system, tools hash, temperature, max tokens
	model       string
	system      string
	temperature *float64
	maxTokens   int
	buf         []byte
}

func canonicalCalls(calls []ToolCall) []ToolCall {
	if len(calls) == 0 {
		return nil
	}
	if !slices.ContainsFunc(calls, func(c ToolCall) bool { return !isCanonical(c.Arguments) }) {
		return calls // nothing to re-encode: no copy
	}
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		out[i] = ToolCall{ID: c.ID, Name: c.Name, Arguments: canonicalJSON(c.Arguments)}
	}
	return out
}

// canonicalJSON re-encodes JSON with sorted keys and no insignificant
// whitespace; invalid JSON is returned unchanged.
func canonicalJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || isCanonical(b) {
		return b
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// toolFingerprint identifies a tool call by name and canonical arguments.
//
// Arguments are compacted, not re-encoded: a replayed call carries the exact
// bytes of the recorded model response, so key order already matches, and
// compacting is an order of magnitude cheaper than decoding.
func toolFingerprint(name string, args json.RawMessage) string {
	var arr [256]byte
	b := append(append(arr[:0], name...), 0)
	if isCanonical(args) {
		b = append(b, args...) // compact already
	} else {
		buf := bytes.NewBuffer(b)
		if json.Compact(buf, args) != nil {
			buf.Write(args)
		}
		b = buf.Bytes()
	}
	return hex16(sha256.Sum256(b))
}

// hex16 is the hex text of the first 16 bytes of a hash, the form of every
// fingerprint; it allocates only the string.
func hex16(sum [sha256.Size]byte) string {
	var out [32]byte
	hex.Encode(out[:], sum[:16])
	return string(out[:])
}
