package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// approvalModel asks for two parallel calls of "delete" then reports the
// results. Call ids are unique in the conversation ("d1", "d2" in the first
// turn), as a real provider's are.
func approvalModel() *fakeModel {
	return &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == "user" {
			sfx := ""
			if n := assistantTurns(req); n > 0 {
				sfx = "_" + strconv.Itoa(n)
			}
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("d1"+sfx, "delete", `{"id":1}`), call("d2"+sfx, "delete", `{"id":2}`)}}, nil
		}
		var res []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				res = append(res, m.ToolCallID+":"+m.Content)
			}
		}
		return &llm.Response{Content: strings.Join(res, " | ")}, nil
	}}
}

func TestApprovalsAnsweredInAnyOrder(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	del := tool.Func(llm.ToolDef{Name: "delete", Parameters: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		executed.Add(1)
		return &tool.Result{Content: "deleted " + string(c.Arguments)}, nil
	})
	e, st := newEngine(t, &stepwise.Agent{Name: "ops", Model: approvalModel(), Tools: []tool.Tool{del},
		Approvals: map[string]stepwise.ApprovalPolicy{"delete": stepwise.ApproveAlways}})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "ops", Input: "delete 1 and 2"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunWaiting || executed.Load() != 0 {
		t.Fatalf("status %s executed %d", run.Status, executed.Load())
	}
	pend, err := e.Pending(ctx, run.ID)
	if err != nil || len(pend) != 2 {
		t.Fatalf("pending %v %d", err, len(pend))
	}
	byCall := map[string]string{}
	for _, p := range pend {
		byCall[p.Request.Approval.ID] = p.RequestID
	}
	// Bad answers change nothing.
	for _, bad := range []string{`{"approved":"yes"}`, `{"ok":true}`, `not json`, ``} {
		if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: byCall["d2"], Answer: json.RawMessage(bad)}); !errors.Is(err, stepwise.ErrInvalidAnswer) {
			t.Fatalf("answer %q: %v", bad, err)
		}
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: "unknown", Answer: json.RawMessage(`{"approved":true}`)}); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	// Answer the second first: reject with a message; the run still waits.
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: byCall["d2"], Answer: json.RawMessage(`{"approved":false,"message":"keep 2"}`)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.RunGet(ctx, &store.RunGetParams{ID: run.ID}); r.Status != steptype.RunWaiting {
		t.Fatalf("status after one answer: %s", r.Status)
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: byCall["d2"], Answer: json.RawMessage(`{"approved":true}`)}); !errors.Is(err, stepwise.ErrAlreadyAnswered) {
		t.Fatalf("double answer: %v", err)
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: byCall["d1"], Answer: json.RawMessage(`{"approved":true,"always":true}`)}); err != nil {
		t.Fatal(err)
	}
	run, err = e.Wait(ctx, e.Execute(ctx, run.ID))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunCompleted || executed.Load() != 1 {
		t.Fatalf("status %s executed %d", run.Status, executed.Load())
	}
	if !strings.Contains(run.Output, `d1:deleted {"id":1}`) || !strings.Contains(run.Output, "d2:The user rejected this tool call. Message: keep 2") {
		t.Fatalf("output %q", run.Output)
	}
	// "Always" is remembered for the session: the next turn runs without asking.
	run2, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "ops", Input: "again", SessionID: run.SessionID}))
	if err != nil || run2.Status != steptype.RunCompleted || executed.Load() != 3 {
		t.Fatalf("second turn: %v %s executed %d", err, run2.Status, executed.Load())
	}
}

func TestAskHumanSchemaConcurrencyAndCancel(t *testing.T) {
	t.Parallel()
	var before atomic.Int64
	prep := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		before.Add(1) // must run exactly once per run, never again on resume
		return &stepwise.Next{Step: "use", Input: &stepwise.InputRequest{Prompt: "How many?",
			Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`)}}, nil
	})
	use := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: stepwise.StepEnd, Output: json.RawMessage(s.LastAnswer().Outputs)}, nil
	})
	e, st := newEngine(t, &stepwise.Agent{Name: "form", StartStep: "prep", Steps: map[string]stepwise.Handler{"prep": prep, "use": use}})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "form"}))
	if err != nil || run.Status != steptype.RunWaiting {
		t.Fatalf("%v %+v", err, run)
	}
	pend, _ := e.Pending(ctx, run.ID)
	req := pend[0].RequestID
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: req, Answer: json.RawMessage(`{"n":0}`)}); !errors.Is(err, stepwise.ErrInvalidAnswer) {
		t.Fatalf("schema violation accepted: %v", err)
	}
	// Many goroutines answer at once: exactly one wins.
	var wins, already atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: req, Answer: json.RawMessage(`{"n":3}`)})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, stepwise.ErrAlreadyAnswered):
				already.Add(1)
			default:
				t.Errorf("answer: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || already.Load() != 31 {
		t.Fatalf("wins %d already %d", wins.Load(), already.Load())
	}
	run, err = e.Wait(ctx, e.Execute(ctx, run.ID))
	if err != nil || run.Status != steptype.RunCompleted || before.Load() != 1 {
		t.Fatalf("%v %s before=%d", err, run.Status, before.Load())
	}
	ss := steps(t, st, run.SessionID)
	if got := strings.Join(kinds(ss), ","); got != "user,custom,input,custom" || string(ss[3].Outputs) != `{"n":3}` {
		t.Fatalf("kinds %s outputs %s", got, ss[3].Outputs)
	}
	// An answer for a cancelled run is refused.
	r2, _ := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "form"}))
	pend, _ = e.Pending(ctx, r2.ID)
	if _, err := e.Cancel(ctx, r2.ID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	// The cancel closed the request in its transaction: nothing is pending.
	if left, err := e.Pending(ctx, r2.ID); err != nil || len(left) != 0 {
		t.Fatalf("pending after cancel = %d, %v; want none", len(left), err)
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: r2.ID, RequestID: pend[0].RequestID, Answer: json.RawMessage(`{"n":1}`)}); !errors.Is(err, stepwise.ErrRunFinished) {
		t.Fatalf("answer after cancel: %v", err)
	}
	if _, err := e.Cancel(ctx, r2.ID, ""); !errors.Is(err, stepwise.ErrRunFinished) {
		t.Fatalf("double cancel: %v", err)
	}
}

func TestInputExpiry(t *testing.T) {
	t.Parallel()
	ask := func(onExpire string) stepwise.Handler {
		return stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			return &stepwise.Next{Step: "done", Input: &stepwise.InputRequest{Prompt: "ok?", ExpiresAfter: time.Millisecond, OnExpire: onExpire, Default: json.RawMessage(`"default answer"`)}}, nil
		})
	}
	done := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: stepwise.StepEnd, Output: s.LastAnswer().Content}, nil
	})
	e, st := newEngine(t,
		&stepwise.Agent{Name: "fails", StartStep: "ask", Steps: map[string]stepwise.Handler{"ask": ask("fail"), "done": done}},
		&stepwise.Agent{Name: "defaults", StartStep: "ask", Steps: map[string]stepwise.Handler{"ask": ask("default"), "done": done}})
	ctx := context.Background()
	r1, _ := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "fails"}))
	r2, _ := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "defaults"}))
	pend, _ := e.Pending(ctx, r1.ID)
	// The request expires 1 ms after it was made: wait for that instant
	// (a deadline of the wall clock, which the engine reads too).
	<-time.After(time.Until(pend[0].Request.ExpiresAt))
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: r1.ID, RequestID: pend[0].RequestID, Answer: json.RawMessage(`"late"`)}); !errors.Is(err, stepwise.ErrAlreadyAnswered) {
		t.Fatalf("expired answer accepted: %v", err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		a, _ := st.RunGet(ctx, &store.RunGetParams{ID: r1.ID})
		b, _ := st.RunGet(ctx, &store.RunGetParams{ID: r2.ID})
		if a.Status == steptype.RunFailed && b.Status == steptype.RunCompleted {
			if a.Error.Code != "input_expired" {
				t.Fatalf("error %+v", a.Error)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("expiry not applied")
}
