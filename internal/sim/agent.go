package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
	"time"
)

// errCrashed is what a tool of a crashed engine returns: its process died
// before the side effect.
var errCrashed = errors.New("sim: the engine crashed")

// agent is the simulated agent of one engine: each turn, two parallel calls
// of a side-effect tool, then a call that needs a human's approval, then
// an answer. Its tools belong to the engine, so a crashed engine's act no
// more.
func (w *world) agent(n *node) *stepwise.Agent {
	script := scripted.Script{Strict: true, Loop: true, Turns: []scripted.Turn{
		{Text: "working", ToolCalls: []steptype.ToolCall{
			{Name: "record", Arguments: json.RawMessage(`{"part":"a"}`)}, {Name: "record", Arguments: json.RawMessage(`{"part":"b"}`)}}},
		{Text: "deploying", ToolCalls: []steptype.ToolCall{{Name: "deploy", Arguments: json.RawMessage(`{"env":"prod"}`)}}},
		{Text: "done"},
	}}
	return &stepwise.Agent{Name: "worker", Model: &slowModel{w: w, inner: scripted.New("sim", script)},
		Tools: []tool.Tool{w.sideEffect(n, "record"), w.sideEffect(n, "deploy")}, Approvals: map[string]stepwise.ApprovalPolicy{"deploy": stepwise.ApproveAlways}}
}

// sideEffect is a tool that takes a seeded time, then acts (counted by
// idempotency key), unless its engine crashed meanwhile. Acting after the
// call's result committed breaks an invariant.
func (w *world) sideEffect(n *node, name string) tool.Tool {
	def := llm.ToolDef{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}
	return tool.Func(def, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		w.mu.Lock()
		si := w.sessIdx[c.SessionID]
		w.mu.Unlock()
		if !sleep(ctx, w.dur(fmt.Sprintf("tool %s %s", c.ID, c.Arguments), si*100+c.Attempt, time.Millisecond, 800*time.Millisecond)) {
			return nil, ctx.Err()
		}
		if n.dead.Load() {
			return nil, errCrashed
		}
		steps, err := w.inner.StepList(context.Background(), &store.StepListParams{RunID: c.RunID})
		if err != nil {
			return nil, err
		}
		for _, s := range steps {
			if s.Kind == steptype.KindTool && s.ToolCallID == c.ID && s.Status == steptype.StepCompleted {
				w.fail("session %d: call %s executed on node %d after its result committed as step %d", si, c.ID, n.id, s.Sequence)
			}
		}
		w.mu.Lock()
		w.execs[c.IdempotencyKey]++
		w.mu.Unlock()
		w.logf("session %d: %s %s %s on node %d", si, name, c.ID, c.Arguments, n.id)
		return &tool.Result{Content: fmt.Sprintf("%s %s", name, c.Arguments)}, nil
	})
}

// slowModel answers as its scripted model does after a latency fixed by
// the seed and the request.
type slowModel struct {
	w     *world
	inner llm.Model
}

func (m *slowModel) Name() string { return m.inner.Name() }

func (m *slowModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	var key strings.Builder
	for _, msg := range req.Messages {
		fmt.Fprintf(&key, "%s:%s:%s|", msg.Role, msg.Content, msg.ToolCallID)
	}
	d := m.w.dur(key.String(), 0, time.Millisecond, 500*time.Millisecond)
	return func(yield func(*llm.Response, error) bool) {
		if !sleep(ctx, d) {
			yield(nil, ctx.Err())
			return
		}
		for r, err := range m.inner.Generate(ctx, req) {
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
}
