package stepwise_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

// BenchmarkNextStepCatchUp measures the client protocol read by a caller
// that starts after a 1,001-step run finished: one op is one NextStep call
// (one event), from the first continuation to the result.
func BenchmarkNextStepCatchUp(b *testing.B) {
	for _, name := range []string{"memory", "sqlite"} {
		b.Run(name, func(b *testing.B) {
			var st store.Store = memory.New()
			if name == "sqlite" {
				lite, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
				if err != nil {
					b.Fatal(err)
				}
				defer lite.Close()
				st = lite
			}
			echo := tool.New("echo", "echo", func(ctx context.Context, a echoArgs) (int, error) { return a.N, nil })
			agent := &stepwise.Agent{Name: "bench", Model: scripted.Loop("echo", `{"n":1}`, 500, "done"), Tools: []tool.Tool{echo}}
			e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "bench", Input: "go"}))
			if err != nil {
				b.Fatal(err)
			}
			c := e.Client()
			inv := &stepwise.Invocation{RunID: r.ID, SessionID: r.SessionID}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_, err := c.NextStep(ctx, inv)
				if errors.Is(err, stepwise.ErrRunFinished) {
					inv = &stepwise.Invocation{RunID: r.ID, SessionID: r.SessionID}
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
