package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// finishedSession runs chat to completion n times in one session.
func finishedSession(t *testing.T, env *testEnv, agent string, turns ...string) string {
	t.Helper()
	ctx := context.Background()
	sid := ""
	for _, in := range turns {
		var opts []stepwise.InitiateOption
		if sid != "" {
			opts = append(opts, stepwise.InSession(sid))
		}
		run, _, err := env.c.StartRun(ctx, agent, in, opts...)
		if err != nil {
			t.Fatal(err)
		}
		sid = run.SessionID
		env.waitRun(run.ID, steptype.RunCompleted)
	}
	return sid
}

func TestSessionsListAndPages(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hi"), chatAgent("other", "yo")})
	ctx := context.Background()
	for i := range 5 {
		finishedSession(t, env, "chat", fmt.Sprint("turn ", i))
	}
	finishedSession(t, env, "other", "x")
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := env.c.Sessions(ctx, client.SessionQuery{Agent: "chat", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Sessions {
			if s.Agent != "chat" || seen[s.ID] {
				t.Fatalf("session %+v (seen %v)", s, seen[s.ID])
			}
			seen[s.ID] = true
		}
		if page.Next == "" {
			if pages != 2 {
				t.Fatalf("%d pages", pages+1)
			}
			break
		}
		cursor = page.Next
	}
	if len(seen) != 5 {
		t.Fatalf("%d sessions of chat", len(seen))
	}
	all, err := env.c.Sessions(ctx, client.SessionQuery{Query: "oth"})
	if err != nil || len(all.Sessions) != 1 || all.Sessions[0].Agent != "other" {
		t.Fatalf("query: %+v %v", all, err)
	}
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions?limit=0", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions?limit=1001", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions?limit=-1", "")
	env.problem(422, CodeInvalidArgument, "GET", "/v1/sessions?cursor=%25%25%25", "")
	status, body := env.call("GET", "/v1/sessions?agent=nobody", "")
	if status != 200 || !strings.Contains(string(body), `"sessions":[]`) {
		t.Fatalf("empty list: %d %s", status, body)
	}
}

func TestSessionOperations(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello")})
	ctx := context.Background()
	sid := finishedSession(t, env, "chat", "one", "two") // steps: user, llm, user, llm
	sess, err := env.c.Session(ctx, sid)
	if err != nil || sess.LastSequence != 4 || sess.Agent != "chat" {
		t.Fatalf("session %+v %v", sess, err)
	}
	sum, err := env.c.Summary(ctx, sid)
	if err != nil || sum.TotalSteps != 4 || sum.ByKind[steptype.KindUser] != 2 || sum.Runs[steptype.RunCompleted] != 2 || sum.SequenceRange != [2]int64{1, 4} {
		t.Fatalf("summary %+v %v", sum, err)
	}
	preview, err := env.c.Context(ctx, sid, "")
	if err != nil || len(preview.Messages) != 4 || preview.Messages[2].Content != "two" {
		t.Fatalf("context %+v %v", preview, err)
	}
	if _, err := env.c.Context(ctx, sid, "ghost"); !errors.Is(err, stepwise.ErrUnknownAgent) {
		t.Fatalf("context with unknown agent: %v", err)
	}
	steps, err := env.c.Steps(ctx, client.StepQuery{SessionID: sid, StartSeq: 2, EndSeq: 3})
	if err != nil || len(steps) != 2 || steps[0].Sequence != 2 || steps[1].Sequence != 3 {
		t.Fatalf("range: %v %v", steps, err)
	}
	if steps, err := env.c.Steps(ctx, client.StepQuery{SessionID: sid, Limit: 1}); err != nil || len(steps) != 1 {
		t.Fatalf("limit: %v %v", steps, err)
	}
	st, err := env.c.Step(ctx, sid, 3)
	if err != nil || st.Content != "two" || st.Kind != steptype.KindUser {
		t.Fatalf("step 3: %+v %v", st, err)
	}
	if _, err := env.c.Step(ctx, sid, 9); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("step 9: %v", err)
	}
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions/"+sid+"/steps/0", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions/"+sid+"/steps/abc", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions/"+sid+"/steps?start_seq=3&end_seq=2", "")
	env.problem(400, CodeInvalidParam, "GET", "/v1/sessions/"+sid+"/steps?start_seq=x", "")
	env.problem(404, CodeNotFound, "GET", "/v1/sessions/nope/steps", "")
	env.problem(404, CodeNotFound, "GET", "/v1/sessions/nope", "")
	env.problem(404, CodeNotFound, "GET", "/v1/sessions/nope/summary", "")

	// Fork at 2, with an edit at 3, forks of forks, the tree.
	fork, err := env.c.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: 2, Title: "f1"})
	if err != nil || fork.ParentSessionID != sid || fork.ForkSequence != 2 || fork.LastSequence != 2 {
		t.Fatalf("fork %+v %v", fork, err)
	}
	edit := "TWO"
	edited, err := env.c.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: 3, Edit: &edit})
	if err != nil || edited.LastSequence != 3 {
		t.Fatalf("edited fork %+v %v", edited, err)
	}
	if st, err := env.c.Step(ctx, edited.ID, 3); err != nil || st.Content != "TWO" {
		t.Fatalf("edited step %+v %v", st, err)
	}
	// The fork shows the parent's steps as its own first ones.
	if st, err := env.c.Step(ctx, fork.ID, 1); err != nil || st.Content != "one" || st.SessionID != sid {
		t.Fatalf("inherited step %+v %v", st, err)
	}
	if _, err := env.c.Step(ctx, fork.ID, 3); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("parent step past the fork point: %v", err)
	}
	sub, err := env.c.Fork(ctx, stepwise.ForkParams{SessionID: fork.ID, At: 1})
	if err != nil {
		t.Fatal(err)
	}
	forks, err := env.c.Forks(ctx, sid)
	if err != nil || len(forks) != 2 {
		t.Fatalf("forks %v %v", forks, err)
	}
	tree, err := env.c.Tree(ctx, sub.ID)
	if err != nil || tree.Session.ID != sid || len(tree.Forks) != 2 {
		t.Fatalf("tree %+v %v", tree, err)
	}
	env.problem(422, CodeInvalidArgument, "POST", "/v1/sessions/"+sid+"/fork", `{"sequence":0}`)
	env.problem(422, CodeInvalidArgument, "POST", "/v1/sessions/"+sid+"/fork", `{"sequence":99}`)
	env.problem(400, CodeInvalidJSON, "POST", "/v1/sessions/"+sid+"/fork", `{"sequence":"2"}`)

	// Truncate is refused under a fork; delete too.
	env.problem(409, CodeConflict, "DELETE", "/v1/sessions/"+sid+"/steps?start_seq=2", "")
	if _, err := env.c.Truncate(ctx, sid, 1); !errors.Is(err, stepwise.ErrConflict) {
		t.Fatalf("truncate under fork: %v", err)
	}
	if err := env.c.DeleteSession(ctx, sid); !errors.Is(err, stepwise.ErrConflict) {
		t.Fatalf("delete under fork: %v", err)
	}
	env.problem(400, CodeInvalidParam, "DELETE", "/v1/sessions/"+sid+"/steps", "")
	env.problem(400, CodeInvalidParam, "DELETE", "/v1/sessions/"+sid+"/steps?start_seq=0", "")
	// Truncate the unforked sub... its own steps: none beyond 1.
	if n, err := env.c.Truncate(ctx, edited.ID, 3); err != nil || n != 1 {
		t.Fatalf("truncate edited fork: %d %v", n, err)
	}

	// Retry (non-destructive) forks and runs again; the original is unchanged.
	rrun, err := env.c.Retry(ctx, stepwise.RetryParams{SessionID: sid, From: 4})
	if err != nil || rrun.SessionID == sid {
		t.Fatalf("retry %+v %v", rrun, err)
	}
	env.waitRun(rrun.ID, steptype.RunCompleted)
	if s, _ := env.c.Session(ctx, rrun.SessionID); s.LastSequence != 4 {
		t.Fatalf("retried session %+v", s)
	}
	if s, _ := env.c.Session(ctx, sid); s.LastSequence != 4 {
		t.Fatalf("original changed: %+v", s)
	}
	env.problem(422, CodeInvalidArgument, "POST", "/v1/sessions/"+sid+"/retry", `{"sequence":0}`)
	env.problem(400, CodeInvalidJSON, "POST", "/v1/sessions/"+sid+"/retry", `{"sequence":1,"force":true}`)

	// Replay reuses the recorded model answers.
	prun, err := env.c.Replay(ctx, stepwise.ReplayParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(prun.ID, steptype.RunCompleted)
	replayed, err := env.c.Steps(ctx, client.StepQuery{SessionID: prun.SessionID, StartSeq: 2, EndSeq: 2})
	if err != nil || len(replayed) != 1 || replayed[0].Replay != "reused" {
		t.Fatalf("replayed %+v %v", replayed, err)
	}

	// Delete a leaf session.
	if err := env.c.DeleteSession(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.c.Session(ctx, sub.ID); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
}

func TestIngestAndCrossSessionAccess(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello"), approvalAgent("ops")})
	ctx := context.Background()
	a, err := env.c.CreateSession(ctx, "external", "ingested")
	if err != nil || a.Agent != "external" {
		t.Fatalf("create %+v %v", a, err)
	}
	b, err := env.c.CreateSession(ctx, "external", "other")
	if err != nil {
		t.Fatal(err)
	}
	in := []*stepwise.Step{
		{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "hi"},
		{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{}`)}}},
		{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: "c1", ToolName: "f", Content: "42"},
	}
	out, err := env.c.Ingest(ctx, stepwise.IngestParams{SessionID: a.ID, Steps: in})
	if err != nil || len(out) != 3 || out[2].Sequence != 3 || out[2].SessionID != a.ID {
		t.Fatalf("ingest %+v %v", out, err)
	}
	if _, err := env.c.Ingest(ctx, stepwise.IngestParams{SessionID: b.ID, Steps: []*stepwise.Step{{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "b1"}}}); err != nil {
		t.Fatal(err)
	}
	// Re-sending the same ids is a no-op.
	again, err := env.c.Ingest(ctx, stepwise.IngestParams{SessionID: a.ID, Steps: out})
	if err != nil || len(again) != 3 {
		t.Fatalf("re-ingest %v %v", again, err)
	}
	if s, _ := env.c.Session(ctx, a.ID); s.LastSequence != 3 {
		t.Fatalf("after re-ingest: %+v", s)
	}
	// Bad steps change nothing.
	sid := a.ID
	path := "/v1/sessions/" + sid + "/steps"
	env.problem(400, CodeInvalidJSON, "POST", path, `{"steps":[{"kind":"user","role":"user","content":"x","colour":"red"}]}`)
	env.problem(400, CodeInvalidJSON, "POST", path, `{"steps":[{"kind":"llm","metrics":{"latency":1}}]}`)
	env.problem(400, CodeInvalidJSON, "POST", path, `{"steps":[{"kind":"llm","tool_calls":[{"id":"1","name":"f","args":{}}]}]}`)
	env.problem(400, CodeInvalidJSON, "POST", path, `{"steps":[{"v":2,"kind":"user"}]}`)
	env.problem(400, CodeInvalidJSON, "POST", path, `{"steps":[null]}`)
	env.problem(422, CodeInvalidArgument, "POST", path, `{"steps":[]}`)
	env.problem(422, CodeInvalidArgument, "POST", path, `{"steps":[{"kind":"banana"}]}`)
	env.problem(422, CodeInvalidArgument, "POST", path, `{"steps":[{"kind":"tool","role":"tool"}]}`)
	env.problem(422, CodeInvalidArgument, "POST", path, `{"steps":[{"kind":"user","session_id":"`+b.ID+`"}]}`)
	env.problem(409, CodeConflict, "POST", path, `{"steps":[{"kind":"user","sequence":2}]}`)
	env.problem(404, CodeNotFound, "POST", "/v1/sessions/nope/steps", `{"steps":[{"kind":"user"}]}`)
	if s, _ := env.c.Session(ctx, sid); s.LastSequence != 3 {
		t.Fatalf("bad ingest changed the session: %+v", s)
	}
	// Cross-session: b's sequence 1 is b's own step, never a's.
	st, err := env.c.Step(ctx, b.ID, 1)
	if err != nil || st.Content != "b1" || st.SessionID != b.ID {
		t.Fatalf("b/1: %+v %v", st, err)
	}
	if _, err := env.c.Step(ctx, b.ID, 2); !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("b/2 must not exist (a has 2): %v", err)
	}
	// A request of one run cannot be answered through another run, nor
	// can a step that is not a request.
	x, err := env.c.Initiate(ctx, "ops", "x")
	if err != nil {
		t.Fatal(err)
	}
	y, err := env.c.Initiate(ctx, "ops", "y")
	if err != nil {
		t.Fatal(err)
	}
	env.waitRun(x.RunID, steptype.RunWaiting)
	env.waitRun(y.RunID, steptype.RunWaiting)
	px, err := env.c.Pending(ctx, x.RunID)
	if err != nil || len(px) != 1 {
		t.Fatalf("pending x: %v %v", px, err)
	}
	env.problem(404, CodeNotFound, "POST", "/v1/runs/"+y.RunID+"/inputs/"+px[0].RequestID, `{"answer":{"approved":true}}`)
	env.problem(404, CodeNotFound, "POST", "/v1/runs/"+x.RunID+"/inputs/"+out[0].ID, `{"answer":"x"}`)
	if again, _ := env.c.Pending(ctx, x.RunID); len(again) != 1 {
		t.Fatalf("x's request changed: %v", again)
	}
	status, body := env.call("GET", "/v1/sessions/"+a.ID+"/steps", "")
	list := decode[wire.StepList](t, body)
	if status != 200 || len(list.Steps) != 3 {
		t.Fatalf("list: %d %s", status, body)
	}
	for _, s := range list.Steps {
		if s.SessionID != a.ID {
			t.Fatalf("foreign step %+v", s)
		}
	}
}
