package storetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// The append benchmarks every driver reports (docs/PERFORMANCE.md): what the
// engine does per step — one llm step plus the run's cursor update in one
// StepAppend — measured in ns/op and steps/s.

// benchStep is a typical llm step: a short answer with usage metrics.
func benchStep(sessionID, id string) *steptype.Step {
	return &steptype.Step{
		ID: id, SessionID: sessionID, RunID: sessionID, Kind: steptype.KindLLM, Name: "llm",
		Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
		Content: "The answer is 42. Let me know if you need anything else.",
		Metrics: steptype.Metrics{InputTokens: 812, OutputTokens: 14, Cost: 0.0004, Model: "m", Provider: "p",
			Duration: 900 * time.Millisecond},
	}
}

// appender appends to one session and its claimed run (both named session).
type appender struct {
	st      store.Store
	session string
	n       int
}

var benchCursor = "tools"

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

func (a *appender) append(b *testing.B, idPrefix string) {
	a.n++
	_, err := a.st.StepAppend(b.Context(), &store.StepAppendParams{
		Steps: []*steptype.Step{benchStep(a.session, fmt.Sprintf("%s-%d", idPrefix, a.n))},
		Runs:  []*store.RunUpdateParams{{ID: a.session, Owner: "w", Cursor: &benchCursor, StepDelta: 1}},
	})
	if err != nil {
		b.Fatal(err)
	}
}

func reportSteps(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchAppendSingle measures one goroutine appending one step and its run
// update per transaction to an empty store.
func BenchAppendSingle(b *testing.B, st store.Store) {
	a := newAppender(b, st, "s")
	for b.Loop() {
		a.append(b, a.session)
	}
	reportSteps(b)
}

// BenchAppendConcurrent measures writers goroutines appending at once, each
// to its own session and run, or (shared) all to one session, where they
// queue on its sequence; ns/op is wall time per step across all of them.
func BenchAppendConcurrent(b *testing.B, st store.Store, writers int, shared bool) {
	apps := make([]*appender, writers)
	for i := range apps {
		if shared && i > 0 {
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
		prefix := a.session
		if shared {
			// Own step ids, shared session and run.
			a, prefix = &appender{st: st, session: apps[0].session}, fmt.Sprint("g", i)
		}
		for pb.Next() {
			a.append(b, prefix)
		}
	})
	reportSteps(b)
}
