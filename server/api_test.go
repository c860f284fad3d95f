package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

func TestClientProtocolToResult(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{toolAgent("looper", 3, 0)})
	ctx := context.Background()
	var c stepwise.Client = env.c
	inv, err := c.Initiate(ctx, "looper", "go")
	if err != nil {
		t.Fatal(err)
	}
	var conts int
	for {
		step, err := c.NextStep(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		if cont, ok := step.(*stepwise.Continuation); ok {
			if cont.Step == nil || cont.Step.RunID != inv.RunID {
				t.Fatalf("continuation %+v", cont)
			}
			conts++
			continue
		}
		res, ok := step.(*stepwise.Result)
		if !ok {
			t.Fatalf("got %T %+v", step, step)
		}
		if res.Value != "done" {
			t.Fatalf("result %q", res.Value)
		}
		break
	}
	if conts != 8 { // user, 3 × (llm, tool), llm
		t.Fatalf("%d continuations, want 8", conts)
	}
	run, err := env.c.Run(ctx, inv.RunID)
	if err != nil || run.Status != steptype.RunCompleted || run.StepCount != 8 {
		t.Fatalf("run %+v %v", run, err)
	}
	// The result came once: asking again is refused with run_finished.
	if step, err := c.NextStep(ctx, inv); !errors.Is(err, stepwise.ErrRunFinished) {
		t.Fatalf("after the end: %T %v", step, err)
	}
}

func TestHumanInputOverHTTP(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{askAgent("asker"), approvalAgent("ops")})
	ctx := context.Background()
	inv, err := env.c.Initiate(ctx, "asker", "hi")
	if err != nil {
		t.Fatal(err)
	}
	var req *stepwise.HumanInputRequest
	for req == nil {
		step, err := env.c.NextStep(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		req, _ = step.(*stepwise.HumanInputRequest)
	}
	if req.Prompt != "What is your name?" {
		t.Fatalf("request %+v", req)
	}
	pend, err := env.c.Pending(ctx, inv.RunID)
	if err != nil || len(pend) != 1 || pend[0].RequestID != req.RequestID {
		t.Fatalf("pending %+v %v", pend, err)
	}
	all, err := env.c.Pending(ctx, "")
	if err != nil || len(all) != 1 {
		t.Fatalf("all pending %+v %v", all, err)
	}
	// An empty answer is refused with the validation message; nothing changes.
	_, err = env.c.Answer(ctx, inv.RunID, req.RequestID, json.RawMessage(`"  "`))
	var ce *client.Error
	if !errors.Is(err, stepwise.ErrInvalidAnswer) || !errors.As(err, &ce) || ce.Status != 422 || !strings.Contains(ce.Detail, "empty answer") {
		t.Fatalf("empty answer: %v", err)
	}
	if _, err := env.c.Answer(ctx, inv.RunID, "nope", json.RawMessage(`"x"`)); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	if _, err := env.c.Answer(ctx, "no-such-run", req.RequestID, json.RawMessage(`"x"`)); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if err := env.c.ProvideHumanInput(ctx, inv, req.RequestID, json.RawMessage(`"Ada"`)); err != nil {
		t.Fatal(err)
	}
	// A second answer conflicts: already answered, or (if the run was
	// quick) run finished.
	if err := env.c.ProvideHumanInput(ctx, inv, req.RequestID, json.RawMessage(`"Bob"`)); !errors.Is(err, stepwise.ErrConflict) ||
		!(errors.Is(err, stepwise.ErrAlreadyAnswered) || errors.Is(err, stepwise.ErrRunFinished)) {
		t.Fatalf("second answer: %v", err)
	}
	for {
		step, err := env.c.NextStep(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		if res, ok := step.(*stepwise.Result); ok {
			if res.Value != "Nice to meet you." {
				t.Fatalf("result %q", res.Value)
			}
			break
		}
		if _, ok := step.(*stepwise.Error); ok {
			t.Fatalf("error %+v", step)
		}
	}
	steps, err := env.c.Steps(ctx, client.StepQuery{SessionID: inv.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	var answered bool
	for _, s := range steps {
		if s.Kind == steptype.KindInput && s.Status == steptype.StepCompleted && s.Content == "Ada" {
			answered = true
		}
	}
	if !answered {
		t.Fatalf("no answered input step in %v", steps)
	}

	// Approvals: an invalid approval is refused with 422.
	inv2, err := env.c.Initiate(ctx, "ops", "delete 7")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(inv2.RunID, steptype.RunWaiting)
	pend, err = env.c.Pending(ctx, inv2.RunID)
	if err != nil || len(pend) != 1 || pend[0].Request.Approval == nil {
		t.Fatalf("approval pending %+v %v", pend, err)
	}
	p := env.problem(422, CodeInvalidAnswer, "POST", "/v1/runs/"+inv2.RunID+"/inputs/"+pend[0].RequestID, `{"answer":{"approved":"yes"}}`)
	if !strings.Contains(p.Detail, "approved") {
		t.Fatalf("detail %q", p.Detail)
	}
	env.problem(422, CodeInvalidAnswer, "POST", "/v1/runs/"+inv2.RunID+"/inputs/"+pend[0].RequestID, `{}`)
	if _, err := env.c.Answer(ctx, inv2.RunID, pend[0].RequestID, json.RawMessage(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	if r := env.waitRun(inv2.RunID, steptype.RunCompleted); r.Output != "All done." {
		t.Fatalf("output %q", r.Output)
	}
	// Answering the same request again after the run finished: 409 already_answered.
	env.problem(409, CodeAlreadyAnswered, "POST", "/v1/runs/"+inv2.RunID+"/inputs/"+pend[0].RequestID, `{"answer":{"approved":true}}`)
}

func TestAgentsAndRunsEndpoints(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello there"), approvalAgent("ops")})
	ctx := context.Background()
	agents, err := env.c.Agents(ctx)
	if err != nil || len(agents) != 2 || agents[0].Name != "chat" || agents[1].Name != "ops" {
		t.Fatalf("agents %+v %v", agents, err)
	}
	ops, err := env.c.Agent(ctx, "ops")
	if err != nil || len(ops.Tools) != 1 || ops.Tools[0].Name != "delete" || ops.Approvals["delete"] != "always" || ops.Model != "scripted:ops" || ops.Limits.MaxSteps != 1000 {
		t.Fatalf("agent %+v %v", ops, err)
	}
	if _, err := env.c.Agent(ctx, "ghost"); !errors.Is(err, stepwise.ErrUnknownAgent) || !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
	env.problem(404, CodeUnknownAgent, "POST", "/v1/runs", `{"agent":"ghost","input":"x"}`)
	env.problem(422, CodeInvalidArgument, "POST", "/v1/runs", `{"input":"x"}`)
	env.problem(404, CodeNotFound, "POST", "/v1/runs", `{"agent":"chat","input":"x","session_id":"nope"}`)
	env.problem(422, CodeInvalidArgument, "POST", "/v1/runs", `{"agent":"chat","input":"x","state":[1]}`)
	env.problem(404, CodeNotFound, "GET", "/v1/runs/nope", "")
	env.problem(404, CodeNotFound, "POST", "/v1/runs/nope/cancel", "")
	env.problem(404, CodeNotFound, "GET", "/v1/runs/nope/next?timeout=1ms", "")
	env.problem(404, CodeNotFound, "GET", "/v1/runs/nope/inputs", "")

	status, body := env.call("POST", "/v1/runs", `{"agent":"chat","input":"hi","state":{"n":1},"title":"t1"}`)
	if status != 201 {
		t.Fatalf("initiate: %d %s", status, body)
	}
	created := decode[wire.RunCreated](t, body)
	if created.Run.Agent != "chat" || created.Invocation.RunID != created.Run.ID || created.Invocation.Cursor != "0:0" {
		t.Fatalf("created %+v", created)
	}
	run := env.waitRun(created.Run.ID, steptype.RunCompleted)
	if run.Output != "hello there" || string(run.State) != `{"n":1}` {
		t.Fatalf("run %+v", run)
	}
	// A second turn in the same session; a run of it cannot be cancelled
	// once finished.
	run2, inv2, err := env.c.StartRun(ctx, "chat", "again", stepwise.InSession(run.SessionID))
	if err != nil || run2.SessionID != run.SessionID || inv2.SessionID != run.SessionID {
		t.Fatalf("second turn %+v %v", run2, err)
	}
	env.waitRun(run2.ID, steptype.RunCompleted)
	if _, err := env.c.Cancel(ctx, run2.ID, "late"); !errors.Is(err, stepwise.ErrRunFinished) {
		t.Fatalf("cancel finished: %v", err)
	}
	// Cancel a waiting run.
	inv3, err := env.c.Initiate(ctx, "ops", "delete")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(inv3.RunID, steptype.RunWaiting)
	pend3, err := env.c.Pending(ctx, inv3.RunID)
	if err != nil || len(pend3) != 1 {
		t.Fatalf("pending: %v %v", pend3, err)
	}
	cancelled, err := env.c.Cancel(ctx, inv3.RunID, "changed my mind")
	if err != nil || cancelled.Status != steptype.RunCancelled || cancelled.Error == nil || cancelled.Error.Message != "changed my mind" {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}
	// Its request can no longer be answered: 409 run_finished.
	env.problem(409, CodeRunFinished, "POST", "/v1/runs/"+inv3.RunID+"/inputs/"+pend3[0].RequestID, `{"answer":{"approved":true}}`)
	for {
		step, err := env.c.NextStep(ctx, inv3)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := step.(*stepwise.Continuation); ok {
			continue
		}
		if _, ok := step.(*stepwise.HumanInputRequest); ok {
			continue
		}
		if e, ok := step.(*stepwise.Error); !ok || !strings.Contains(e.Message, "changed my mind") {
			t.Fatalf("next after cancel: %T %+v", step, step)
		}
		break
	}
	// The long-poll answers 204 when nothing happens before its timeout.
	// Past the result of a finished run there is nothing more: 409.
	env.problem(409, CodeRunFinished, "GET", "/v1/runs/"+run2.ID+"/next?after=999:0&timeout=20ms", "")
	inv4, err := env.c.Initiate(ctx, "ops", "delete")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(inv4.RunID, steptype.RunWaiting)
	req, _ := http.NewRequest("GET", env.ts.URL+"/v1/runs/"+inv4.RunID+"/next?after=999:0&timeout=20ms", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Stepwise-Cursor") != "999:0" {
		t.Fatalf("idle long-poll: %d %q", resp.StatusCode, resp.Header.Get("Stepwise-Cursor"))
	}
	env.problem(400, CodeInvalidParam, "GET", "/v1/runs/"+inv4.RunID+"/next?timeout=soon", "")
	env.problem(400, CodeInvalidPosition, "GET", "/v1/runs/"+inv4.RunID+"/next?after=x", "")
}
