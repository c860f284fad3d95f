package postgres_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// benchStep is a typical llm step: a short answer with usage metrics (the
// same as store/sqlite's benchmarks).
func benchStep(sessionID, runID, id string) *steptype.Step {
	return &steptype.Step{
		ID: id, SessionID: sessionID, RunID: runID, Kind: steptype.KindLLM, Name: "llm",
		Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
		Content: "The answer is 42. Let me know if you need anything else.",
		Metrics: steptype.Metrics{InputTokens: 812, OutputTokens: 14, Cost: 0.0004, Model: "m", Provider: "p",
			Duration: 900 * time.Millisecond},
	}
}

// appender owns one session and one claimed run, and appends one step plus
// the run's cursor update per call — what the engine does per step.
type appender struct {
	st      store.Store
	session string
	n       int
}

func newAppender(b *testing.B, st store.Store, name string) *appender {
	ctx := b.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: name}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: name, SessionID: name, Agent: "a",
		Status: steptype.RunRunning, LeaseOwner: "w"}}); err != nil {
		b.Fatal(err)
	}
	return &appender{st: st, session: name}
}

var cursor = "tools"

func (a *appender) append(b *testing.B) {
	a.n++
	_, err := a.st.StepAppend(b.Context(), &store.StepAppendParams{
		Steps: []*steptype.Step{benchStep(a.session, a.session, fmt.Sprintf("%s-%d", a.session, a.n))},
		Runs:  []*store.RunUpdateParams{{ID: a.session, Owner: "w", Cursor: &cursor, StepDelta: 1}},
	})
	if err != nil {
		b.Fatal(err)
	}
}

func reportSteps(b *testing.B, steps int) {
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkStepAppendSingle: one goroutine, one step + run update per
// transaction.
func BenchmarkStepAppendSingle(b *testing.B) {
	a := newAppender(b, openFresh(b), "s")
	for b.Loop() {
		a.append(b)
	}
	reportSteps(b, b.N)
}

// BenchmarkStepAppendConcurrent: 100 goroutines, each appending to its own
// session and run, through pools of 10 (the default) and 50 connections;
// ns/op is wall time per step across all of them. "shared" has the 100
// goroutines append to one session: they queue on its row lock.
func BenchmarkStepAppendConcurrent(b *testing.B) {
	const writers = 100
	for _, c := range []struct {
		name   string
		conns  int32
		shared bool
	}{{"conns=10", 10, false}, {"conns=50", 50, false}, {"conns=10/shared", 10, true}} {
		b.Run(c.name, func(b *testing.B) {
			st := open(b, postgres.Config{Schema: freshSchema(b), MaxConns: c.conns})
			apps := make([]*appender, writers)
			for i := range apps {
				if c.shared && i > 0 {
					apps[i] = &appender{st: st, session: apps[0].session}
					continue
				}
				apps[i] = newAppender(b, st, fmt.Sprint("s", i))
			}
			var next atomic.Int64
			b.SetParallelism((writers + 1) / 2) // × GOMAXPROCS goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1) - 1)
				a := apps[i%writers]
				if c.shared {
					// Own step ids, shared session and run.
					a = &appender{st: st, session: apps[0].session, n: i * 1_000_000}
				}
				for pb.Next() {
					a.append(b)
				}
			})
			reportSteps(b, b.N)
		})
	}
}
