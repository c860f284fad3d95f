package observation

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/tool"
)

// ctxKey carries the step a context executes, for RecordFromContext.
type ctxKey struct{}

type stepCtx struct {
	ref StepRef
	st  *State
}

// WithStep returns ctx marked as executing the step ref, recording its
// events into st.
func WithStep(ctx context.Context, st *State, ref StepRef) context.Context {
	return context.WithValue(ctx, ctxKey{}, &stepCtx{st: st, ref: ref})
}

// RefFromContext returns the step ctx executes (see WithStep).
func RefFromContext(ctx context.Context) (StepRef, bool) {
	sc, ok := ctx.Value(ctxKey{}).(*stepCtx)
	if !ok {
		return StepRef{}, false
	}
	return sc.ref, true
}

// RecordFromContext records ev as an event inside the step ctx executes.
// It reports whether the event was recorded: false when ctx executes no
// step or no observer records events.
func RecordFromContext(ctx context.Context, ev *StepEvent) bool {
	sc, ok := ctx.Value(ctxKey{}).(*stepCtx)
	if !ok || !sc.st.Events() {
		return false
	}
	sc.st.Record(sc.ref, ev)
	return true
}

// Model wraps the model of an llm step so that its request and final
// response are recorded as events of the step ref, and HTTP transports see
// the step in the call's context.
func (st *State) Model(m llm.Model, ref StepRef) llm.Model {
	return &observedModel{Model: m, st: st, ref: ref}
}

type observedModel struct {
	llm.Model
	st  *State
	ref StepRef
}

func (m *observedModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		ctx = WithStep(ctx, m.st, m.ref)
		start := time.Now()
		m.st.Record(m.ref, &StepEvent{Type: StepEventProviderRequest, Name: m.Name(), Time: start.UTC(), Payload: req})
		var final *llm.Response
		var errText string
		for resp, err := range m.Model.Generate(ctx, req) {
			switch {
			case err != nil:
				errText = err.Error()
			case !resp.Partial:
				final = resp
			}
			if !yield(resp, err) {
				if errText == "" && final == nil {
					errText = "stopped by the consumer"
				}
				break
			}
		}
		ev := &StepEvent{Type: StepEventProviderResponse, Name: m.Name(), Time: start.UTC(), Duration: time.Since(start), Error: errText}
		if final != nil {
			ev.Payload = final
		}
		m.st.Record(m.ref, ev)
	}
}

// Tool wraps a tool so that each call is recorded as a tool_invocation
// event of its tool step (named stepName).
func (st *State) Tool(t tool.Tool, stepName string) tool.Tool {
	return &observedTool{Tool: t, st: st, stepName: stepName}
}

type observedTool struct {
	tool.Tool
	st       *State
	stepName string
}

func (t *observedTool) Call(ctx context.Context, c *tool.Call) (res *tool.Result, err error) {
	ref := StepRef{SessionID: c.SessionID, RunID: c.RunID, StepName: t.stepName, ToolCallID: c.ID, Attempt: c.Attempt}
	ctx = WithStep(ctx, t.st, ref)
	start := time.Now()
	inv := &ToolInvocation{Arguments: c.Arguments, IdempotencyKey: c.IdempotencyKey}
	ev := &StepEvent{Type: StepEventToolInvocation, Name: c.Name, Time: start.UTC(), Payload: inv}
	defer func() {
		ev.Duration = time.Since(start)
		if r := recover(); r != nil {
			ev.Error = fmt.Sprintf("panic: %v", r)
			t.st.Record(ref, ev)
			panic(r)
		}
		if err != nil {
			ev.Error = err.Error()
		}
		if res != nil {
			inv.Content, inv.Output, inv.IsError = res.Content, res.Output, res.IsError
		}
		t.st.Record(ref, ev)
	}()
	return t.Tool.Call(ctx, c)
}
