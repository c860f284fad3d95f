package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// TestRetryAndForkInsideParallelCallOverHTTP: through the HTTP API, a retry
// at the second result of a parallel tool call re-runs that call only, and
// a fork cut between the two results continues with a new turn; the strict
// model would fail either run on a malformed request.
func TestRetryAndForkInsideParallelCallOverHTTP(t *testing.T) {
	t.Parallel()
	echo := tool.Func(llm.ToolDef{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "echo " + string(c.Arguments)}, nil
	})
	m := scripted.New("par", scripted.Script{Strict: true, Loop: true, UserTurns: []scripted.UserTurn{{Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}, {Name: "echo", Arguments: json.RawMessage(`{"n":2}`)}}},
		{Text: "done"},
	}}}})
	env := newEnv(t, []*stepwise.Agent{{Name: "par", Model: m, Tools: []tool.Tool{echo}}})
	ctx := context.Background()
	inv, err := env.c.Initiate(ctx, "par", "go")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(inv.RunID, steptype.RunCompleted)
	orig, err := env.c.Steps(ctx, client.StepQuery{SessionID: inv.SessionID})
	if err != nil || len(orig) != 5 {
		t.Fatalf("session %v %v", orig, err)
	}
	run, err := env.c.Retry(ctx, stepwise.RetryParams{SessionID: inv.SessionID, From: 4})
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(run.ID, steptype.RunCompleted)
	got, err := env.c.Steps(ctx, client.StepQuery{SessionID: run.SessionID, StartSeq: 4})
	if err != nil || len(got) != 2 || got[0].Kind != steptype.KindTool || got[0].ToolCallID != orig[3].ToolCallID || got[1].Content != "done" {
		t.Fatalf("retried steps %+v %v", got, err)
	}

	fork, err := env.c.Fork(ctx, stepwise.ForkParams{SessionID: inv.SessionID, At: 3})
	if err != nil {
		t.Fatal(err)
	}
	req, err := env.c.Context(ctx, fork.ID, "")
	if err != nil || len(req.Messages) != 4 || req.Messages[3].Content != stepwise.NotExecutedResult || llm.CheckSequence(req.Messages) != nil {
		t.Fatalf("context of the cut fork %+v %v", req, err)
	}
	inv2, err := env.c.Initiate(ctx, "par", "continue", stepwise.InSession(fork.ID))
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(inv2.RunID, steptype.RunCompleted)
}
