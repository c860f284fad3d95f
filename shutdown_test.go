package stepwise_test

import (
	"context"
	"errors"
	"fmt"
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

// gate is a tool that blocks until its context ends or the gate opens; it
// reports each call it enters and counts executions.
type gate struct {
	entered chan string
	open    chan struct{}
	once    sync.Once
	calls   atomic.Int64
}

func newGate() *gate { return &gate{entered: make(chan string, 64), open: make(chan struct{})} }

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) tool() tool.Tool {
	def := llm.ToolDef{Name: "slow", Description: "waits", Parameters: []byte(`{"type":"object"}`)}
	return tool.Func(def, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		g.calls.Add(1)
		g.entered <- c.ID
		select {
		case <-g.open:
			return &tool.Result{Content: "ok " + string(c.Arguments)}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
}

// waitEntered waits until n calls are in flight.
func (g *gate) waitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("tool call never started")
		}
	}
}

// toolsThenDone asks for n parallel calls of name, then reports their results.
func toolsThenDone(name string, n int) *fakeModel {
	return &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == "user" {
			var calls []stepwise.ToolCall
			for i := range n {
				calls = append(calls, call(fmt.Sprintf("c%d", i), name, fmt.Sprintf(`{"i":%d}`, i)))
			}
			return &llm.Response{ToolCalls: calls}, nil
		}
		var parts []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				parts = append(parts, m.Content)
			}
		}
		return &llm.Response{Content: "done: " + strings.Join(parts, "; ")}, nil
	}}
}

// interruptedNothing checks that no step of the session records the
// interrupted calls and that the run was handed back to the queue.
func interruptedNothing(t *testing.T, st store.Store, r *stepwise.Run) {
	t.Helper()
	for _, s := range steps(t, st, r.SessionID) {
		if s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent || s.Kind == steptype.KindError {
			t.Fatalf("an interrupted call was committed: %s %q %+v", s.Kind, s.Content, s.Error)
		}
	}
	handedBack(t, st, r)
}

// handedBack checks that an interrupted run is queued, its lease released.
func handedBack(t *testing.T, st store.Store, r *stepwise.Run) {
	t.Helper()
	got, err := st.RunGet(context.Background(), &store.RunGetParams{ID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != steptype.RunQueued || got.LeaseOwner != "" {
		t.Fatalf("interrupted run is %s (lease %q), want queued and released", got.Status, got.LeaseOwner)
	}
}

// resumeClean resumes the run on a fresh engine and checks it completes with
// the transcript of an uninterrupted run.
func resumeClean(t *testing.T, st store.Store, a *stepwise.Agent, r *stepwise.Run, wantKinds string) *stepwise.Run {
	t.Helper()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	done, err := e.Wait(context.Background(), e.Resume(context.Background(), r.ID))
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != steptype.RunCompleted {
		t.Fatalf("resumed run %s %+v", done.Status, done.Error)
	}
	ss := steps(t, st, r.SessionID)
	var hop0 []*stepwise.Step
	for _, s := range ss {
		if s.Error != nil {
			t.Fatalf("step %d %s records an error that never happened: %+v", s.Sequence, s.Kind, s.Error)
		}
		if s.Hop == 0 {
			hop0 = append(hop0, s)
		}
	}
	if got := strings.Join(kinds(hop0), ","); got != wantKinds {
		t.Fatalf("kinds = %s, want %s", got, wantKinds)
	}
	return done
}

// interruptTools starts a run of agent a on a new SQLite store and, once
// wait says its tool calls are in flight, stops its execution how says:
// "stop" (Engine.Stop of the background executor), "cancel" (the
// consumer's context, with a cause) or "detach" (the consumer breaks out);
// then it closes the engine.
func interruptTools(t *testing.T, a *stepwise.Agent, how string, wait func()) (store.Store, *stepwise.Run) {
	t.Helper()
	st := openSQLite(t)
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{a}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: a.Name, Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "stop":
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		wait()
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	case "cancel":
		cctx, cancel := context.WithCancelCause(ctx)
		errc := make(chan error, 1)
		go func() { _, err := e.Wait(cctx, e.Execute(cctx, r.ID)); errc <- err }()
		wait()
		sig := errors.New("terminated signal received")
		cancel(sig)
		if err := <-errc; !errors.Is(err, sig) {
			t.Fatalf("Execute after cancel: %v, want the context's cause", err)
		}
	case "detach":
		for ev, err := range e.Execute(ctx, r.ID) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == stepwise.EventStepStarted && ev.StepName == stepwise.StepTools {
				wait()
				break
			}
		}
	}
	_ = e.Close()
	return st, r
}

// TestStopDuringToolCallCommitsNothing stops executions while tool calls are
// in flight, in every way an execution can be stopped without failing its
// run (engine shutdown, the consumer's context cancelled, the consumer
// breaking out), and checks that nothing is committed for the calls, the run
// is handed back, and a resume re-runs them to the uninterrupted transcript.
func TestStopDuringToolCallCommitsNothing(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		for _, how := range []string{"stop", "cancel", "detach"} {
			t.Run(fmt.Sprintf("%s-%dcalls", how, n), func(t *testing.T) {
				t.Parallel()
				g := newGate()
				a := &stepwise.Agent{Name: "worker", Model: toolsThenDone("slow", n), Tools: []tool.Tool{g.tool()}}
				st, r := interruptTools(t, a, how, func() { g.waitEntered(t, n) })
				interruptedNothing(t, st, r)
				g.release()
				resumeClean(t, st, a, r, "user,llm"+strings.Repeat(",tool", n)+",llm")
				if got := g.calls.Load(); got != int64(2*n) {
					t.Fatalf("tool executions = %d, want %d (interrupted calls re-run once)", got, 2*n)
				}
			})
		}
	}
}

// TestStopDuringSubAgentCommitsNothing stops the engine while a sub-agent's
// tool call is in flight: neither the child's tool step nor the parent's
// agent step is committed, and resuming the parent completes both.
func TestStopDuringSubAgentCommitsNothing(t *testing.T) {
	t.Parallel()
	g := newGate()
	child := &stepwise.Agent{Name: "child", Model: toolsThenDone("slow", 2), Tools: []tool.Tool{g.tool()}}
	root := &stepwise.Agent{Name: "root", Model: delegator("child"), SubAgents: []*stepwise.Agent{child}}
	st := openSQLite(t)
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{root}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: "root", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t, 2)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	interruptedNothing(t, st, r)
	g.release()
	done := resumeClean(t, st, root, r, "user,llm,agent,llm")
	if !strings.HasPrefix(done.Output, "child=done: ") || !strings.Contains(done.Output, `ok {"i":0}`) || !strings.Contains(done.Output, `ok {"i":1}`) {
		t.Fatalf("output %q", done.Output)
	}
	kids, err := st.RunList(ctx, &store.RunListParams{ParentRunID: r.ID})
	if err != nil || len(kids) != 1 || kids[0].Status != steptype.RunCompleted {
		t.Fatalf("child runs %v %+v", err, kids)
	}
}

// TestStopKeepsResultReturnedAfterStop stops executions whose tool calls
// see the stop and return their results all the same (a side effect that
// happened): the results commit, the run is handed back, and the resumed
// run goes on from them without calling the tool again.
func TestStopKeepsResultReturnedAfterStop(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "cancel", "detach"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const n = 3
			entered := make(chan struct{}, n)
			var calls atomic.Int64
			def := llm.ToolDef{Name: "slow", Description: "acts, and reports even when stopped", Parameters: []byte(`{"type":"object"}`)}
			stubborn := tool.Func(def, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
				calls.Add(1)
				entered <- struct{}{}
				<-ctx.Done()
				return &tool.Result{Content: "done " + c.ID}, nil
			})
			a := &stepwise.Agent{Name: "worker", Model: toolsThenDone("slow", n), Tools: []tool.Tool{stubborn}}
			st, r := interruptTools(t, a, how, func() {
				for range n {
					select {
					case <-entered:
					case <-time.After(30 * time.Second):
						t.Fatal("tool call never started")
					}
				}
			})
			var results int
			for _, s := range steps(t, st, r.SessionID) {
				if s.Kind == steptype.KindTool {
					results++
					if !strings.HasPrefix(s.Content, "done ") || s.Error != nil {
						t.Fatalf("tool step %q %+v, want the result the tool returned", s.Content, s.Error)
					}
				}
			}
			if results != n {
				t.Fatalf("%d tool results committed, want the %d the tool returned after the stop", results, n)
			}
			handedBack(t, st, r)
			resumeClean(t, st, a, r, "user,llm"+strings.Repeat(",tool", n)+",llm")
			if got := calls.Load(); got != n {
				t.Fatalf("tool executions = %d, want %d (a result in hand is never executed again)", got, n)
			}
		})
	}
}
