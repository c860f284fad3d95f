package stepwise_test

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// firstRequestModel records when its first request of a run arrives and
// answers every request with a final message.
type firstRequestModel struct {
	first atomic.Int64 // unix nanoseconds of the first request; 0: none yet
	msgs  atomic.Int64 // messages in that request
}

func (m *firstRequestModel) Name() string { return "bench:first-request" }

func (m *firstRequestModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		if m.first.CompareAndSwap(0, time.Now().UnixNano()) {
			m.msgs.Store(int64(len(req.Messages)))
		}
		yield(&llm.Response{Content: "done"}, nil)
	}
}

// BenchmarkHistoryFirstStep measures, on a SQLite store with a
// 100,000-step session, the time from starting a run to its first model
// request: a new turn on the session, and a run on a fork at step 50,000
// (ms-to-first-request; ns/op is the whole run, which commits two steps).
func BenchmarkHistoryFirstStep(b *testing.B) {
	const n = 100000
	model := &firstRequestModel{}
	agent := &stepwise.Agent{Name: "bench", Model: model}
	st := openSQLite(b)
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	sid := fillSession(b, e, n)
	ctx := context.Background()
	run := func(b *testing.B, session func() string, want int64) {
		var toFirst time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			id := session()
			model.first.Store(0)
			b.StartTimer()
			start := time.Now()
			r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "bench", SessionID: id, Input: "next"}))
			b.StopTimer()
			if err != nil || r.Status != steptype.RunCompleted {
				b.Fatal(err, r)
			}
			first := model.first.Load()
			if first == 0 {
				b.Fatal("no model request")
			}
			if got := model.msgs.Load(); got < want {
				b.Fatalf("first request has %d messages, want at least %d", got, want)
			}
			toFirst += time.Duration(first - start.UnixNano())
			b.StartTimer()
		}
		// The time to the first request, not the whole run (ns/op).
		b.ReportMetric(float64(toFirst.Microseconds())/1000/float64(b.N), "ms-to-first-request")
	}
	b.Run(fmt.Sprintf("turn-%d", n), func(b *testing.B) {
		// Each op adds one turn (user + assistant): the session grows by
		// 2·b.N steps, negligible against n.
		run(b, func() string { return sid }, n+1)
	})
	b.Run(fmt.Sprintf("fork-%d-at-%d", n, n/2), func(b *testing.B) {
		run(b, func() string {
			f, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: n / 2})
			if err != nil {
				b.Fatal(err)
			}
			return f.ID
		}, n/2+1)
	})
	// Where the time goes: reading and decoding the steps alone, and the
	// context rebuild (read + conversation with its hash chain) alone.
	fork, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: n / 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("fork-read-%d", n/2), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			steps, err := st.StepList(ctx, &store.StepListParams{SessionID: fork.ID})
			if err != nil || len(steps) != n/2 {
				b.Fatal(err, len(steps))
			}
		}
	})
	b.Run(fmt.Sprintf("fork-context-%d", n/2), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			req, err := e.ContextPreview(ctx, fork.ID, "bench")
			if err != nil || len(req.Messages) != n/2 {
				b.Fatal(err)
			}
		}
	})
}
