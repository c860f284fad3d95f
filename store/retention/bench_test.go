package retention_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/retention"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// seed imports sessions × perSession typical llm steps, last active a
// month ago.
func seed(b *testing.B, st store.Store, sessions, perSession int) {
	b.Helper()
	ctx := context.Background()
	at := time.Now().Add(-30 * 24 * time.Hour).UTC()
	for i := range sessions {
		sid := fmt.Sprintf("s%06d", i)
		s := &steptype.Session{ID: sid, Agent: "bench", LastSequence: int64(perSession), CreatedAt: at, UpdatedAt: at}
		if err := st.SessionImport(ctx, &store.SessionImportParams{Session: s}); err != nil {
			b.Fatal(err)
		}
		var steps []*steptype.Step
		for j := 1; j <= perSession; j++ {
			steps = append(steps, &steptype.Step{ID: fmt.Sprintf("%s-%d", sid, j), SessionID: sid, Sequence: int64(j), RunID: "r" + sid,
				Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted, Role: steptype.RoleAssistant, CreatedAt: at,
				Content: "The answer is 42. Let me know if you need anything else.",
				Metrics: steptype.Metrics{InputTokens: 812, OutputTokens: 14, Cost: 0.0004, Model: "m", Provider: "p"}})
			if len(steps) == 500 || j == perSession {
				if err := st.StepImport(ctx, &store.StepImportParams{Steps: steps}); err != nil {
					b.Fatal(err)
				}
				steps = steps[:0]
			}
		}
	}
}

// BenchmarkPrune100k prunes 100,000 steps (100 sessions of 1,000) while
// an agent keeps appending to another session, and reports the prune's
// steps/s and the agent's worst and 99th-percentile append latency during
// it: batching keeps both small.
func BenchmarkPrune100k(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, open func(b *testing.B) store.Store) {
		var steps int64
		var elapsed time.Duration
		var lat []time.Duration
		for b.Loop() {
			b.StopTimer()
			st := open(b)
			seed(b, st, 100, 1000)
			if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "live", Agent: "live"}); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					t0 := time.Now()
					_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: fmt.Sprintf("live-%d-%d", len(lat), i),
						SessionID: "live", Kind: steptype.KindLLM, Status: steptype.StepCompleted, Content: "working"}}})
					if err != nil {
						b.Error(err)
						return
					}
					lat = append(lat, time.Since(t0))
				}
			}()
			b.StartTimer()
			t0 := time.Now()
			res, err := retention.Prune(ctx, st, retention.Params{OlderThan: 24 * time.Hour, Agent: "bench"})
			elapsed += time.Since(t0)
			b.StopTimer()
			close(stop)
			wg.Wait()
			if err != nil {
				b.Fatal(err)
			}
			steps += res.Steps
			st.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
		if len(lat) > 0 {
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "append-p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "append-max-ms")
		}
	}
	b.Run("SQLite", func(b *testing.B) {
		run(b, func(b *testing.B) store.Store {
			st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "p.db")})
			if err != nil {
				b.Fatal(err)
			}
			return st
		})
	})
	b.Run("Postgres", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		run(b, func(b *testing.B) store.Store {
			r := make([]byte, 6)
			rand.Read(r)
			schema := "swprune_" + hex.EncodeToString(r)
			b.Cleanup(func() {
				if c, err := pgx.Connect(ctx, dsn); err == nil {
					_, _ = c.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
					c.Close(ctx)
				}
			})
			st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			return st
		})
	})
}
