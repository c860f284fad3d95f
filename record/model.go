package record

import (
	"context"
	"iter"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Model wraps m: each call records the request's new user messages and
// then an llm step (content, reasoning, tool calls, usage, model, timings,
// first-token latency), or an error step when the call fails. Streaming
// is passed through unchanged.
func Model(m llm.Model, r *Recorder) llm.Model { return &model{m: m, r: r} }

type model struct {
	m llm.Model
	r *Recorder
}

// Provider reports the wrapped model's provider, if it says.
func (w *model) Provider() string {
	if p, ok := w.m.(llm.Provider); ok {
		return p.Provider()
	}
	return ""
}

func (w *model) Name() string { return w.m.Name() }

func (w *model) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		start := time.Now()
		var first time.Duration
		for resp, err := range w.m.Generate(ctx, req) {
			if err != nil {
				if ctx.Err() == nil { // a cancelled call did not fail
					w.done(ctx, req, start, first, nil, err)
				}
				yield(nil, err)
				return
			}
			if first == 0 && (resp.Content != "" || resp.Reasoning != "" || len(resp.ToolCallDeltas) > 0 || !resp.Partial) {
				first = time.Since(start)
			}
			if !resp.Partial {
				w.done(ctx, req, start, first, resp, nil)
			}
			if !yield(resp, nil) {
				return
			}
		}
	}
}

func (w *model) done(ctx context.Context, req *llm.Request, start time.Time, first time.Duration, resp *llm.Response, callErr error) {
	end := time.Now()
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	steps := w.r.newMessages(req, start)
	st := &stepwise.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant}
	if callErr != nil {
		st = &stepwise.Step{Kind: steptype.KindError, Name: "llm", Status: steptype.StepFailed,
			Error: &steptype.StepError{Message: callErr.Error(), Class: steptype.ErrorPermanent}}
	} else {
		st.Content, st.Reasoning, st.ToolCalls = resp.Content, resp.Reasoning, resp.ToolCalls
		st.Metrics.InputTokens, st.Metrics.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
		st.Metrics.CachedTokens, st.Metrics.ReasoningTokens = resp.Usage.CachedTokens, resp.Usage.ReasoningTokens
		st.Metrics.Model = resp.Model
		if resp.FinishReason != "" {
			st.Metadata = map[string]any{"finish_reason": resp.FinishReason}
		}
	}
	if st.Metrics.Model == "" {
		st.Metrics.Model = w.m.Name()
	}
	st.Metrics.Provider = w.Provider()
	st.Metrics.StartedAt, st.Metrics.FinishedAt, st.Metrics.Duration = start, end, end.Sub(start)
	st.Metrics.FirstTokenLatency = first
	_ = w.r.record(ctx, append(steps, st))
}
