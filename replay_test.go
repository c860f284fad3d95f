package stepwise_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// reverseTools is a tool whose parallel calls finish in reverse call order
// while armed: call i of a round waits for call i+1 to finish (rounds differ
// by their number of calls).
type reverseTools struct {
	armed atomic.Bool
	done  [8][8]chan struct{} // [last][n] closed when call n finished
}

func newReverseTools() *reverseTools {
	r := &reverseTools{}
	for i := range r.done {
		for j := range r.done[i] {
			r.done[i][j] = make(chan struct{})
		}
	}
	return r
}

func (r *reverseTools) tool() tool.Tool {
	return tool.New("work", "works", func(ctx context.Context, a struct {
		N    int `json:"n"`
		Last int `json:"last"`
	}) (string, error) {
		if r.armed.Load() && a.N < a.Last {
			select {
			case <-r.done[a.Last][a.N+1]:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		if r.armed.Load() {
			close(r.done[a.Last][a.N])
		}
		return fmt.Sprintf("result %d", a.N), nil
	})
}

// parallelRounds asks for rounds of n parallel calls, then answers.
func parallelRounds(rounds ...int) *fakeModel {
	return &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		turn := assistantTurns(req)
		if turn < len(rounds) {
			var calls []stepwise.ToolCall
			for i := range rounds[turn] {
				calls = append(calls, call(fmt.Sprintf("r%dc%d", turn, i), "work", fmt.Sprintf(`{"n":%d,"last":%d}`, i, rounds[turn]-1)))
			}
			return &llm.Response{Content: fmt.Sprintf("round %d", turn), ToolCalls: calls}, nil
		}
		return &llm.Response{Content: "finished"}, nil
	}}
}

// TestReplayIsDeterministic records a session whose parallel tool results
// committed out of call order, replays it 50 times, and checks that every
// replay reuses every model response and tool result (none live, the model
// is never called) and commits the reused results in their recorded order.
func TestReplayIsDeterministic(t *testing.T) {
	t.Parallel()
	// The tools finish in reverse call order; their commits follow closely
	// but may still interleave, so record until the committed order differs
	// from the call order (the case a replay used to get wrong).
	var (
		m    *fakeModel
		e    *stepwise.Engine
		st   store.Store
		rec  *stepwise.Run
		want string
	)
	order := func(sessionID string) string {
		var ids []string
		for _, s := range steps(t, st, sessionID) {
			if s.Kind == steptype.KindTool {
				ids = append(ids, s.ToolCallID)
			}
		}
		return strings.Join(ids, ",")
	}
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		rt := newReverseTools()
		m = parallelRounds(4, 3)
		e, st = newEngine(t, &stepwise.Agent{Name: "par", Model: m, Tools: []tool.Tool{rt.tool()}, Limits: stepwise.Limits{MaxParallelTools: 8}})
		rt.armed.Store(true)
		var err error
		rec, err = e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "par", Input: "go"}))
		if err != nil || rec.Status != steptype.RunCompleted {
			t.Fatalf("recording: %v %+v", err, rec)
		}
		rt.armed.Store(false)
		want = order(rec.SessionID)
		if want != "r0c0,r0c1,r0c2,r0c3,r1c0,r1c1,r1c2" {
			break
		}
		if attempt == 20 {
			t.Fatalf("recorded order %s 20 times, want results out of call order", want)
		}
	}
	t.Logf("recorded order %s", want)
	calls := m.calls.Load()
	for i := range 50 {
		r, err := e.ReplayAll(ctx, stepwise.ReplayParams{SessionID: rec.SessionID})
		if err != nil || r.Status != steptype.RunCompleted {
			t.Fatalf("replay %d: %v %+v", i, err, r)
		}
		reused, live := 0, 0
		for _, s := range steps(t, st, r.SessionID) {
			switch s.Replay {
			case "reused":
				reused++
			case "live":
				live++
			}
		}
		if live != 0 || reused != 10 {
			t.Fatalf("replay %d: %d steps reused, %d live; want 10 reused, 0 live", i, reused, live)
		}
		if got := order(r.SessionID); got != want {
			t.Fatalf("replay %d: tool results committed as %s, recorded %s", i, got, want)
		}
	}
	if n := m.calls.Load() - calls; n != 0 {
		t.Fatalf("replays called the model %d times", n)
	}
}
