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
// (ms-to-first-request; ns/op is the whole run, which commits two steps),
// for an agent with no token budget configured (the default one, from the
// context window of a model the table does not know: DefaultContextWindow),
// one with NoTokenBudget (the model sees every message) and one with a
// budget of 4,000 tokens (it sees the last few hundred messages). The first context
// build of the session derives its context checkpoints (ms-first-build,
// measured once before the runs); every later one starts from them.
func BenchmarkHistoryFirstStep(b *testing.B) {
	const n, budget = 100000, 4000
	model := &firstRequestModel{}
	agents := []*stepwise.Agent{{Name: "bench", Model: model},
		{Name: "bench-none", Model: model, Context: stepwise.ContextPolicy{TokenBudget: stepwise.NoTokenBudget}},
		{Name: "bench-budget", Model: model, Context: stepwise.ContextPolicy{TokenBudget: budget}}}
	st := openSQLite(b)
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: agents})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	sid := fillSession(b, e, n)
	ctx := context.Background()
	start := time.Now()
	if _, err := e.ContextPreview(ctx, sid, "bench"); err != nil {
		b.Fatal(err)
	}
	firstBuild := time.Since(start)
	// want is the fewest messages of the first request, most the most.
	run := func(b *testing.B, agent string, session func() string, want, most int64) {
		var toFirst, cpu time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			id := session()
			model.first.Store(0)
			b.StartTimer()
			start, cpu0 := time.Now(), cpuTime()
			r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: agent, SessionID: id, Input: "next"}))
			cpu += cpuTime() - cpu0
			b.StopTimer()
			if err != nil || r.Status != steptype.RunCompleted {
				b.Fatal(err, r)
			}
			first := model.first.Load()
			if first == 0 {
				b.Fatal("no model request")
			}
			if got := model.msgs.Load(); got < want || got > most {
				b.Fatalf("first request has %d messages, want %d to %d", got, want, most)
			}
			toFirst += time.Duration(first - start.UnixNano())
			b.StartTimer()
		}
		// The time to the first request, not the whole run (ns/op).
		b.ReportMetric(float64(toFirst.Microseconds())/1000/float64(b.N), "ms-to-first-request")
		// CPU time (user + system) of the process during the run: what
		// the run costs whatever else loads the machine.
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(firstBuild.Microseconds())/1000, "ms-first-build")
		b.ReportMetric(float64(model.msgs.Load()), "msgs-sent")
	}
	fork := func() string {
		f, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: n / 2})
		if err != nil {
			b.Fatal(err)
		}
		return f.ID
	}
	for _, c := range []struct {
		agent, suffix string
		// fewest and most messages of the first request on the session
		// and on the fork
		want, most, forkWant, forkMost int64
	}{
		{"bench", "", 2, llm.DefaultContextWindow / 4 * 3, 2, llm.DefaultContextWindow / 4 * 3},
		{"bench-none", "-none", n + 1, 2 * n, n/2 + 1, n/2 + 1},
		{"bench-budget", "-budget", 2, budget / 4, 2, budget / 4},
	} {
		b.Run(fmt.Sprintf("turn-%d%s", n, c.suffix), func(b *testing.B) {
			// Each op adds one turn (user + assistant): the session grows by
			// 2·b.N steps, negligible against n.
			run(b, c.agent, func() string { return sid }, c.want, c.most)
		})
		b.Run(fmt.Sprintf("fork-%d-at-%d%s", n, n/2, c.suffix), func(b *testing.B) {
			run(b, c.agent, fork, c.forkWant, c.forkMost)
		})
	}
	// Where the time goes: reading and decoding the steps alone, and the
	// context build (read + conversation) alone.
	f := fork()
	b.Run(fmt.Sprintf("fork-read-%d", n/2), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			steps, err := st.StepList(ctx, &store.StepListParams{SessionID: f})
			if err != nil || len(steps) != n/2 {
				b.Fatal(err, len(steps))
			}
		}
	})
	for _, agent := range []string{"bench", "bench-none", "bench-budget"} {
		b.Run(fmt.Sprintf("fork-context-%d-%s", n/2, agent), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				req, err := e.ContextPreview(ctx, f, agent)
				if err != nil || agent == "bench-none" && len(req.Messages) != n/2 {
					b.Fatal(err)
				}
			}
		})
	}
}
