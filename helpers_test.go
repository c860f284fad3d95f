package stepwise_test

import (
	"context"
	"encoding/json"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// fakeModel answers with a function of the request and counts calls. It is
// strict: a request whose messages a real provider would refuse (see
// llm.CheckSequence) fails like a 400, unless lax is set.
type fakeModel struct {
	calls atomic.Int64
	fn    func(req *llm.Request) (*llm.Response, error)
	lax   bool
}

func (m *fakeModel) Name() string { return "fake:test" }

func (m *fakeModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		m.calls.Add(1)
		if !m.lax {
			if err := llm.CheckSequence(req.Messages); err != nil {
				yield(nil, err)
				return
			}
		}
		resp, err := m.fn(req)
		if err != nil {
			yield(nil, err)
			return
		}
		if resp.Content != "" && !yield(&llm.Response{Partial: true, Content: resp.Content}, nil) {
			return
		}
		yield(resp, nil)
	}
}

// assistantTurns counts assistant messages in a request.
func assistantTurns(req *llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

func call(id, name, args string) stepwise.ToolCall {
	return stepwise.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func newEngine(t *testing.T, agents ...*stepwise.Agent) (*stepwise.Engine, store.Store) {
	t.Helper()
	st := memory.New()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, st
}

func steps(t *testing.T, st store.Store, sessionID string) []*stepwise.Step {
	t.Helper()
	out, err := st.StepList(context.Background(), &store.StepListParams{SessionID: sessionID})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kinds(ss []*stepwise.Step) []string {
	var out []string
	for _, s := range ss {
		out = append(out, string(s.Kind))
	}
	return out
}
