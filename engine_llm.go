package stepwise

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

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
	call := new(runexec.ModelCall)
	req := &call.Req
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
	if rec := x.replay.TakeLLM(fp); rec != nil {
		runexec.Reuse(step, rec)
		return &Next{Step: x.afterLLM(step), record: step}, nil
	}
	if x.replay != nil {
		step.Replay = "live"
	}
	if err := x.CallModel(ctx, x.ObserveModel(model, step), call, s.name, step, x.e.cfg.Prices); err != nil {
		return nil, err
	}
	return x.builtinNext(StepLLM, Next{Step: x.afterLLM(step), record: step}), nil
}

func (x *execution) afterLLM(s *Step) string {
	if len(s.ToolCalls) > 0 {
		return StepTools
	}
	return x.agent.AfterLLM
}
