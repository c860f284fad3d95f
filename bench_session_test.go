package stepwise_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

func openSQLite(tb testing.TB) store.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "bench.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// fillSession ingests n message steps into a new session.
func fillSession(tb testing.TB, e *stepwise.Engine, n int) string {
	tb.Helper()
	ctx := context.Background()
	s, err := e.CreateSession(ctx, "bench", "")
	if err != nil {
		tb.Fatal(err)
	}
	const batch = 1000
	for i := 0; i < n; i += batch {
		var steps []*stepwise.Step
		for j := i; j < min(n, i+batch); j++ {
			role, kind := steptype.RoleUser, steptype.KindUser
			if j%2 == 1 {
				role, kind = steptype.RoleAssistant, steptype.KindLLM
			}
			steps = append(steps, &stepwise.Step{Kind: kind, Role: role, Content: fmt.Sprintf("message %d with some words in it", j)})
		}
		if _, err := e.Ingest(ctx, stepwise.IngestParams{SessionID: s.ID, Steps: steps}); err != nil {
			tb.Fatal(err)
		}
	}
	return s.ID
}

// BenchmarkFork measures forking sessions of growing length on SQLite: the
// cost must not grow with the length (nothing is copied).
func BenchmarkFork(b *testing.B) {
	for _, n := range []int{100, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e, _ := stepwise.New(stepwise.Config{Store: openSQLite(b)})
			defer e.Close()
			sid := fillSession(b, e, n)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: int64(n / 2)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadAndContext10k reads all steps of a 10,000-step session and
// builds the model context of its next call.
func BenchmarkReadAndContext10k(b *testing.B) {
	st := openSQLite(b)
	agent := &stepwise.Agent{Name: "bench", Model: scripted.Loop("echo", "", 0, "done")}
	e, _ := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
	defer e.Close()
	sid := fillSession(b, e, 10000)
	ctx := context.Background()
	b.Run("read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			steps, err := st.StepList(ctx, &store.StepListParams{SessionID: sid})
			if err != nil || len(steps) != 10000 {
				b.Fatal(err, len(steps))
			}
		}
	})
	b.Run("context", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			req, err := e.ContextPreview(ctx, sid, "bench")
			if err != nil || len(req.Messages) != 10000 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReplayReused replays a recorded tool-loop session in which every
// model response and tool result is reused; one op is one replayed step.
func BenchmarkReplayReused(b *testing.B) {
	st := openSQLite(b)
	echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
	iterations := max(1, b.N/2)
	agent := &stepwise.Agent{Name: "bench", Model: scripted.Loop("echo", `{"n":1}`, iterations, "done"), Tools: []tool.Tool{echo},
		Limits: stepwise.Limits{MaxSteps: 2*iterations + 10}}
	e, _ := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
	defer e.Close()
	ctx := context.Background()
	rec, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "bench", Input: "go"}))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	r, err := e.ReplayAll(ctx, stepwise.ReplayParams{SessionID: rec.SessionID})
	b.StopTimer()
	if err != nil || r.Status != steptype.RunCompleted {
		b.Fatal(err, r)
	}
	live, _ := st.StepList(ctx, &store.StepListParams{SessionID: r.SessionID})
	for _, s := range live {
		if s.Replay == "live" {
			b.Fatalf("step %d ran live", s.Sequence)
		}
	}
}

// BenchmarkParkedRuns parks 10,000 runs on human input (SQLite store) and
// reports the Go heap they hold beyond the store, the goroutines left, and
// the time to answer and resume one to completion.
func BenchmarkParkedRuns(b *testing.B) {
	const n = 10000
	ask := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: "done", Input: &stepwise.InputRequest{Prompt: "ok?"}}, nil
	})
	done := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: stepwise.StepEnd}, nil
	})
	for i := 0; i < b.N; i++ {
		st := openSQLite(b)
		e, _ := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "park", StartStep: "ask",
			Steps: map[string]stepwise.Handler{"ask": ask, "done": done}}}})
		ctx := context.Background()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		ids := make([]string, 0, n)
		for j := 0; j < n; j++ {
			r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "park"}))
			if err != nil || r.Status != steptype.RunWaiting {
				b.Fatal(err, r)
			}
			ids = append(ids, r.ID)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/parked-run")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0), "goroutines")
		start := time.Now()
		const resumes = 100
		for _, id := range ids[:resumes] {
			pend, err := e.Pending(ctx, id)
			if err != nil || len(pend) != 1 {
				b.Fatal(err)
			}
			if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: id, RequestID: pend[0].RequestID, Answer: json.RawMessage(`"yes"`)}); err != nil {
				b.Fatal(err)
			}
			r, err := e.Wait(ctx, e.Execute(ctx, id))
			if err != nil || r.Status != steptype.RunCompleted {
				b.Fatal(err, r)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/resumes, "us/resume")
		e.Close()
	}
}
