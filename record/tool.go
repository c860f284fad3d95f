package record

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// Tool wraps t: each call records a tool step with the arguments, the
// result and the timings. A failed call is recorded as a tool step whose
// content is the error (what the model will read) and status failed.
func Tool(t tool.Tool, r *Recorder) tool.Tool { return &wrapped{t: t, r: r} }

// Tools wraps every tool of ts (see Tool).
func Tools(ts []tool.Tool, r *Recorder) []tool.Tool {
	out := make([]tool.Tool, len(ts))
	for i, t := range ts {
		out[i] = Tool(t, r)
	}
	return out
}

type wrapped struct {
	t tool.Tool
	r *Recorder
}

func (w *wrapped) Definition() llm.ToolDef { return w.t.Definition() }

func (w *wrapped) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	start := time.Now()
	res, err := w.t.Call(ctx, c)
	end := time.Now()
	if ctx.Err() != nil && err != nil {
		return res, err // cancelled: nothing happened worth a step
	}
	name := c.Name
	if name == "" {
		name = w.t.Definition().Name
	}
	st := &stepwise.Step{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: c.ID, ToolName: name, Inputs: c.Arguments}
	switch {
	case err != nil:
		st.Content, st.Status = err.Error(), steptype.StepFailed
		st.Error = &steptype.StepError{Message: err.Error(), Class: steptype.ErrorPermanent}
	case res != nil:
		st.Content, st.Outputs = res.Content, res.Output
		if st.Content == "" && len(res.Output) > 0 {
			st.Content = string(res.Output)
		}
		if res.IsError {
			st.Status = steptype.StepFailed
		}
	}
	if len(st.Outputs) == 0 && st.Content != "" {
		st.Outputs, _ = json.Marshal(st.Content)
	}
	if st.ToolCallID == "" {
		st.ToolCallID = "call_" + stepwise.NewID()
	}
	st.Metrics.StartedAt, st.Metrics.FinishedAt, st.Metrics.Duration = start, end, end.Sub(start)
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	w.r.toolCalls[st.ToolCallID] = true
	_ = w.r.record(ctx, []*stepwise.Step{st})
	return res, err
}
