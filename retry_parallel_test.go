package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

// parallelAgent answers every user message with two parallel tool calls,
// then a text, on a strict scripted model: a request a real provider would
// refuse fails the run.
func parallelAgent(execs *atomic.Int64) *stepwise.Agent {
	mk := func(name string) tool.Tool {
		return tool.Func(llm.ToolDef{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *tool.Call) (*tool.Result, error) {
			execs.Add(1)
			return &tool.Result{Content: name + " ok"}, nil
		})
	}
	m, err := scripted.Parse("parallel.yaml", []byte(`
strict: true
loop: true
user_turns:
  - turns:
      - tool_calls: [{name: a, arguments: {x: 1}}, {name: b, arguments: {x: 2}}]
      - text: done
`))
	if err != nil {
		panic(err)
	}
	return &stepwise.Agent{Name: "par", Model: m, Tools: []tool.Tool{mk("a"), mk("b")}, Limits: stepwise.Limits{MaxParallelTools: 2}}
}

func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	lite, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "retry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	return map[string]store.Store{"memory": memory.New(), "sqlite": lite}
}

// contextOf returns the model messages a session's steps make, as the engine
// would send them next.
func contextOf(t *testing.T, e *stepwise.Engine, sessionID string) []llm.Message {
	t.Helper()
	req, err := e.ContextPreview(context.Background(), sessionID, "")
	if err != nil {
		t.Fatal(err)
	}
	return req.Messages
}

// finish runs a run to its end, approving every approval and answering
// every question it asks, and checks it completed with a valid context.
func finish(t *testing.T, e *stepwise.Engine, what string, run *stepwise.Run) {
	t.Helper()
	ctx := context.Background()
	r, err := e.Wait(ctx, e.Execute(ctx, run.ID))
	for i := 0; err == nil && r.Status == steptype.RunWaiting && i < 10; i++ {
		pend, perr := e.Pending(ctx, r.ID)
		if perr != nil || len(pend) == 0 {
			t.Fatalf("%s: waiting with %d requests: %v", what, len(pend), perr)
		}
		for _, p := range pend {
			answer := json.RawMessage(`"Ada"`)
			if p.Request.Approval != nil {
				answer = json.RawMessage(`{"approved":true}`)
			}
			if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: r.ID, RequestID: p.RequestID, Answer: answer}); err != nil {
				t.Fatalf("%s: answer: %v", what, err)
			}
		}
		r, err = e.Wait(ctx, e.Execute(ctx, r.ID))
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if r.Status != steptype.RunCompleted || r.Output != "done" {
		msg := ""
		if r.Error != nil {
			msg = r.Error.Message
		}
		t.Fatalf("%s: run %s output %q: %s", what, r.Status, r.Output, msg)
	}
	if err := llm.CheckSequence(contextOf(t, e, r.SessionID)); err != nil {
		t.Fatalf("%s: final context: %v", what, err)
	}
}

// TestRetryForkEditAtEveryStepOfParallelTools builds a two-turn session
// whose model calls two tools in parallel, then retries, forks and forks
// with an edit at every one of its steps, and runs each to completion on a
// strict model (memory and SQLite stores). A retry at a tool step re-runs
// exactly the calls without a result in the kept steps.
func TestRetryForkEditAtEveryStepOfParallelTools(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var execs atomic.Int64
			e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{parallelAgent(&execs)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			ctx := context.Background()
			first, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "par", Input: "go"}))
			if err != nil || first.Status != steptype.RunCompleted {
				t.Fatalf("first turn: %+v %v", first, err)
			}
			sid := first.SessionID
			second, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "par", SessionID: sid, Input: "again"}))
			if err != nil || second.Status != steptype.RunCompleted {
				t.Fatalf("second turn: %+v %v", second, err)
			}
			orig := steps(t, st, sid)
			if got := fmt.Sprint(kinds(orig)); got != "[user llm tool tool llm user llm tool tool llm]" {
				t.Fatalf("session %s", got)
			}
			for k := int64(1); k <= int64(len(orig)); k++ {
				at := orig[k-1]
				// Retry from k: a fork at k-1 and a run that regenerates k.
				before := execs.Load()
				run, err := e.Retry(ctx, stepwise.RetryParams{SessionID: sid, From: k})
				if err != nil {
					t.Fatalf("retry %d: %v", k, err)
				}
				finish(t, e, fmt.Sprintf("retry at %d (%s)", k, at.Kind), run)
				if at.Kind == steptype.KindTool {
					answered := 0
					for _, s := range orig[:k-1] {
						if s.Kind == steptype.KindTool && s.RunID == at.RunID {
							answered++
						}
					}
					want := int64(2 - answered)
					ran := steps(t, st, run.SessionID)[k-1:]
					if n := execs.Load() - before; n != want || ran[0].Kind != steptype.KindTool || ran[want].Kind != steptype.KindLLM {
						t.Fatalf("retry at tool step %d ran %d tools, want %d: %v", k, n, want, kinds(ran))
					}
				}
				// Fork at k, then a new user turn in the fork.
				fork, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: k})
				if err != nil {
					t.Fatalf("fork %d: %v", k, err)
				}
				run, err = e.StartRun(ctx, stepwise.StartParams{Agent: "par", SessionID: fork.ID, Input: "continue"})
				if err != nil {
					t.Fatal(err)
				}
				finish(t, e, fmt.Sprintf("fork at %d (%s)", k, at.Kind), run)
				// Fork at k with step k edited, then a new user turn.
				edit := "edited " + string(at.Kind)
				fork, err = e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: k, Edit: &edit})
				if err != nil {
					t.Fatalf("fork with edit at %d: %v", k, err)
				}
				run, err = e.StartRun(ctx, stepwise.StartParams{Agent: "par", SessionID: fork.ID, Input: "continue"})
				if err != nil {
					t.Fatal(err)
				}
				finish(t, e, fmt.Sprintf("fork with edit at %d (%s)", k, at.Kind), run)
				// Retrying the edited fork from its edited step works too.
				run, err = e.Retry(ctx, stepwise.RetryParams{SessionID: fork.ID, From: k})
				if err != nil {
					t.Fatalf("retry of the edited fork at %d: %v", k, err)
				}
				finish(t, e, fmt.Sprintf("retry of the edited fork at %d (%s)", k, at.Kind), run)
			}
		})
	}
}

// TestContextClosesCallsWithoutResults: a fork cut inside a parallel tool
// call, continued by a new user turn, sends the missing result as a
// not-executed tool message before the user message; the preview of a
// session whose run is still going leaves the calls open.
func TestContextClosesCallsWithoutResults(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	e, st := newEngine(t, parallelAgent(&execs))
	ctx := context.Background()
	first, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "par", Input: "go"}))
	if err != nil || first.Status != steptype.RunCompleted {
		t.Fatalf("%+v %v", first, err)
	}
	fork, err := e.Fork(ctx, stepwise.ForkParams{SessionID: first.SessionID, At: 3})
	if err != nil {
		t.Fatal(err)
	}
	msgs := contextOf(t, e, fork.ID)
	if len(msgs) != 4 || msgs[3].Role != steptype.RoleTool || msgs[3].Content != stepwise.NotExecutedResult {
		t.Fatalf("preview of the cut fork: %+v", msgs)
	}
	missing := msgs[3].ToolCallID
	if err := llm.CheckSequence(msgs); err != nil {
		t.Fatal(err)
	}
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "par", SessionID: fork.ID, Input: "continue"}))
	if err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("%+v %v", r, err)
	}
	ss := steps(t, st, fork.ID)
	// The stored steps are untouched: the closing result is a view.
	for _, s := range ss {
		if s.ToolCallID == missing && s.Sequence > 3 {
			t.Fatalf("a result for %s was stored: %+v", missing, s)
		}
	}
	// A queued run (a retry at the cut tool step) will run the call: the
	// preview leaves it open.
	run, err := e.Retry(ctx, stepwise.RetryParams{SessionID: first.SessionID, From: 4})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := contextOf(t, e, run.SessionID); len(msgs) != 3 || llm.CheckSequence(msgs) == nil {
		t.Fatalf("preview with a queued run: %+v", msgs)
	}
}

// TestRetryForkEditAtEveryStepWithHumanInput does the same on a session
// whose parallel call mixes a plain tool, a tool that needs approval and an
// ask_human question: the retry at an input step asks again, a fork cut
// before the answers closes the unanswered calls.
func TestRetryForkEditAtEveryStepWithHumanInput(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			plain := tool.Func(llm.ToolDef{Name: "a", Parameters: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *tool.Call) (*tool.Result, error) {
				return &tool.Result{Content: "a ok"}, nil
			})
			guarded := tool.Func(llm.ToolDef{Name: "c", Parameters: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *tool.Call) (*tool.Result, error) {
				return &tool.Result{Content: "c ok"}, nil
			})
			m, err := scripted.Parse("hitl.yaml", []byte(`
strict: true
loop: true
user_turns:
  - turns:
      - tool_calls: [{name: a}, {name: c}, {name: ask_human, arguments: {question: "Name?"}}]
      - text: done
`))
			if err != nil {
				t.Fatal(err)
			}
			agent := &stepwise.Agent{Name: "par", Model: m, Tools: []tool.Tool{plain, guarded, stepwise.AskHuman()},
				Approvals: map[string]stepwise.ApprovalPolicy{"c": stepwise.ApproveAlways}}
			e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			ctx := context.Background()
			first, err := e.StartRun(ctx, stepwise.StartParams{Agent: "par", Input: "go"})
			if err != nil {
				t.Fatal(err)
			}
			finish(t, e, "first run", first)
			sid := first.SessionID
			orig := steps(t, st, sid)
			if got := fmt.Sprint(kinds(orig)); got != "[user llm tool input input tool llm]" {
				t.Fatalf("session %s", got)
			}
			for k := int64(1); k <= int64(len(orig)); k++ {
				at := orig[k-1]
				run, err := e.Retry(ctx, stepwise.RetryParams{SessionID: sid, From: k})
				if err != nil {
					t.Fatalf("retry %d: %v", k, err)
				}
				finish(t, e, fmt.Sprintf("retry at %d (%s)", k, at.Kind), run)
				edit := "edited"
				for _, ed := range []*string{nil, &edit} {
					fork, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: k, Edit: ed})
					if ed != nil && !at.InMessageContext() {
						if !errors.Is(err, store.ErrInvalid) {
							t.Fatalf("edit of the %s step %d: %v", at.Kind, k, err)
						}
						continue
					}
					if err != nil {
						t.Fatalf("fork at %d (edit %v): %v", k, ed != nil, err)
					}
					run, err := e.StartRun(ctx, stepwise.StartParams{Agent: "par", SessionID: fork.ID, Input: "continue"})
					if err != nil {
						t.Fatal(err)
					}
					finish(t, e, fmt.Sprintf("fork at %d (%s, edit %v)", k, at.Kind, ed != nil), run)
				}
			}
		})
	}
}
