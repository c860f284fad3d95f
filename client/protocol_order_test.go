package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

// orderAgent looks something up, then calls a tool that needs approval, then
// answers: user, llm, tool, llm, input (parks), tool, llm, result.
func orderAgent() *stepwise.Agent {
	lookup := tool.Func(llm.ToolDef{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "user 7 is idle"}, nil
	})
	del := tool.Func(llm.ToolDef{Name: "delete", Parameters: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "deleted"}, nil
	})
	m := scripted.New("order", scripted.Script{Strict: true, Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{ID: "look1", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)}}},
		{ToolCalls: []steptype.ToolCall{{ID: "del1", Name: "delete", Arguments: json.RawMessage(`{"id":7}`)}}},
		{Text: "All done."},
	}})
	return &stepwise.Agent{Name: "order", Model: m, Tools: []tool.Tool{lookup, del},
		Approvals: map[string]stepwise.ApprovalPolicy{"delete": stepwise.ApproveAlways}, Limits: stepwise.Limits{MaxSteps: 50}}
}

// describe renders a protocol event with everything that must be the same
// for every caller.
func describe(step stepwise.AgentStep, cursor string) string {
	switch s := step.(type) {
	case *stepwise.Continuation:
		return fmt.Sprintf("%s continuation seq=%d kind=%s status=%s next=%s progress=%s", cursor, s.Step.Sequence, s.Step.Kind, s.Status, s.CurrentStep, progressText(s.Progress))
	case *stepwise.HumanInputRequest:
		return fmt.Sprintf("%s request approval=%s", cursor, s.Approval.Name)
	case *stepwise.Result:
		return fmt.Sprintf("%s result %q", cursor, s.Value)
	case *stepwise.Error:
		return fmt.Sprintf("%s error %q", cursor, s.Message)
	}
	return fmt.Sprintf("%s %T", cursor, step)
}

var (
	// beforeAnswer is what any caller reads up to the pending request.
	beforeAnswer = []string{
		"1:0 continuation seq=1 kind=user status=running next=llm progress=none",
		"2:0 continuation seq=2 kind=llm status=running next=tools progress=none",
		"3:0 continuation seq=3 kind=tool status=running next=llm progress=none",
		"4:0 continuation seq=4 kind=llm status=running next=tools progress=none",
		"5:0 request approval=delete",
	}
	afterAnswer = []string{
		"6:0 continuation seq=6 kind=tool status=running next=llm progress=none",
		"7:0 continuation seq=7 kind=llm status=running next=end progress=none",
		`7:1 result "All done."`,
	}
	// late is what a caller that starts after the run finished reads: the
	// answered request is a continuation, the run waited at it.
	late = []string{
		"1:0 continuation seq=1 kind=user status=running next=llm progress=none",
		"2:0 continuation seq=2 kind=llm status=running next=tools progress=none",
		"3:0 continuation seq=3 kind=tool status=running next=llm progress=none",
		"4:0 continuation seq=4 kind=llm status=running next=tools progress=none",
		"5:0 continuation seq=5 kind=input status=waiting next=tools progress=none",
		"6:0 continuation seq=6 kind=tool status=running next=llm progress=none",
		"7:0 continuation seq=7 kind=llm status=running next=end progress=none",
		`7:1 result "All done."`,
	}
)

// readN reads n events, stopping early at a request or the end.
func readN(t *testing.T, c stepwise.Client, inv *stepwise.Invocation, stopAtRequest bool) ([]string, *stepwise.HumanInputRequest) {
	t.Helper()
	var out []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		step, err := c.NextStep(ctx, inv)
		cancel()
		if errors.Is(err, stepwise.ErrRunFinished) {
			return out, nil
		}
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		out = append(out, describe(step, inv.Cursor))
		if len(out) > 2*len(late) {
			t.Fatalf("no end after %d events: %v", len(out), out)
		}
		if req, ok := step.(*stepwise.HumanInputRequest); ok && stopAtRequest {
			return out, req
		}
	}
}

func checkList(t *testing.T, who string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s read\n  %v\nwant\n  %v", who, got, want)
	}
}

// TestNextStepOrder drives one run with several steps, a parked approval,
// its answer and the result through the client protocol, in-process and over
// HTTP, on the memory and SQLite stores: every caller gets each event exactly
// once, in step order, whenever it starts, and nothing after the final
// result.
func TestNextStepOrder(t *testing.T) {
	t.Parallel()
	type caller struct {
		name string
		c    stepwise.Client
	}
	var callers []caller
	for _, kind := range []string{"memory", "sqlite"} {
		var st store.Store = memory.New()
		if kind == "sqlite" {
			lite, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "proto.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lite.Close() })
			st = lite
		}
		eng, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{orderAgent()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Close() })
		srv, err := server.New(server.Config{Engine: eng})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		t.Cleanup(srv.Close)
		httpc, err := client.New(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		callers = append(callers, caller{kind + "/in-process", eng.Client()}, caller{kind + "/http", httpc})
	}
	for _, tc := range callers {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			inv, err := tc.c.Initiate(ctx, "order", "delete user 7 if idle")
			if err != nil {
				t.Fatal(err)
			}
			// A: follows the run from the start, live.
			got, req := readN(t, tc.c, inv, true)
			checkList(t, "live caller", got, beforeAnswer)
			if req == nil {
				t.Fatal("no request")
			}
			// B: starts from the beginning once the run is parked.
			invB := &stepwise.Invocation{RunID: inv.RunID, SessionID: inv.SessionID, Cursor: "0:0"}
			gotB, _ := readN(t, tc.c, invB, true)
			checkList(t, "caller starting at a parked run", gotB, beforeAnswer)
			if err := tc.c.ProvideHumanInput(ctx, inv, req.RequestID, json.RawMessage(`{"approved":true}`)); err != nil {
				t.Fatal(err)
			}
			got, _ = readN(t, tc.c, inv, false)
			checkList(t, "live caller after the answer", got, afterAnswer)
			gotB, _ = readN(t, tc.c, invB, false)
			checkList(t, "second caller after the answer", gotB, afterAnswer)
			// C: starts after the run finished.
			invC := &stepwise.Invocation{RunID: inv.RunID, SessionID: inv.SessionID, Cursor: "0:0"}
			gotC, _ := readN(t, tc.c, invC, false)
			checkList(t, "late caller", gotC, late)
			// Resuming from any position returns the rest of the list.
			for i := range late {
				cur := "0:0"
				if i > 0 {
					cur = late[i-1][:3]
				}
				inv := &stepwise.Invocation{RunID: inv.RunID, SessionID: inv.SessionID, Cursor: cur}
				got, _ := readN(t, tc.c, inv, false)
				checkList(t, "caller resuming at "+cur, got, late[i:])
			}
		})
	}
}

// TestNextStepSubAgentRequest: a question a sub-agent asks reaches the caller
// of the parent run, in order, once, and is answered through it (in-process
// and over HTTP).
func TestNextStepSubAgentRequest(t *testing.T) {
	t.Parallel()
	child := &stepwise.Agent{Name: "clerk", Tools: []tool.Tool{stepwise.AskHuman()}, Model: scripted.New("clerk", scripted.Script{Strict: true, Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{Name: stepwise.AskHumanTool, Arguments: json.RawMessage(`{"question":"Which file?"}`)}}},
		{Text: "filed"},
	}})}
	parent := &stepwise.Agent{Name: "boss", SubAgents: []*stepwise.Agent{child}, Model: scripted.New("boss", scripted.Script{Strict: true, Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{Name: "clerk", Arguments: json.RawMessage(`{"input":"file it"}`)}}},
		{Text: "All done."},
	}})}
	ts, eng := newServer(t, parent, child)
	httpc, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []stepwise.Client{eng.Client(), httpc} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		inv, err := c.Initiate(ctx, "boss", "please file")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			step, err := c.NextStep(ctx, inv)
			if errors.Is(err, stepwise.ErrRunFinished) {
				break
			}
			if err != nil {
				t.Fatalf("after %v: %v", got, err)
			}
			switch s := step.(type) {
			case *stepwise.Continuation:
				got = append(got, fmt.Sprintf("%s %s hop=%d", inv.Cursor, s.Step.Kind, s.Step.Hop))
			case *stepwise.HumanInputRequest:
				got = append(got, inv.Cursor+" request "+s.Prompt)
				if err := c.ProvideHumanInput(ctx, inv, s.RequestID, json.RawMessage(`"the red one"`)); err != nil {
					t.Fatal(err)
				}
			default:
				got = append(got, inv.Cursor+" "+describe(step, ""))
			}
			if len(got) > 10 {
				t.Fatalf("no end: %v", got)
			}
		}
		// user, llm (call), [child: user, llm, input, llm], agent result, llm.
		want := []string{"1:0 user hop=0", "2:0 llm hop=0", "5:0 request Which file?", "7:0 agent hop=0", "8:0 llm hop=0", `8:1  result "All done."`}
		checkList(t, "caller of the parent run", got, want)
	}
}

// progressText renders a continuation's progress: no step of these runs
// reports any, so none is known (never a share of the step budget).
func progressText(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%.2f", *p)
}
