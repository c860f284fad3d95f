package transfer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/store/transfer"
)

// benchSource writes a SQLite database of sessions × perSession typical
// llm steps (each session with one finished run) and returns its path.
func benchSource(b *testing.B, sessions, perSession int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "src.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for i := range sessions {
		sid := fmt.Sprintf("s%06d", i)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "bench"}); err != nil {
			b.Fatal(err)
		}
		var steps []*steptype.Step
		for j := range perSession {
			steps = append(steps, &steptype.Step{ID: fmt.Sprintf("%s-%d", sid, j), SessionID: sid, RunID: "r" + sid,
				Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted, Role: steptype.RoleAssistant,
				Content: "The answer is 42. Let me know if you need anything else.",
				Metrics: steptype.Metrics{InputTokens: 812, OutputTokens: 14, Cost: 0.0004, Model: "m", Provider: "p", Duration: 900 * time.Millisecond}})
			if len(steps) == 500 || j == perSession-1 {
				if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
					b.Fatal(err)
				}
				steps = steps[:0]
			}
		}
		if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r" + sid, SessionID: sid, Agent: "bench", Status: steptype.RunCompleted}}); err != nil {
			b.Fatal(err)
		}
	}
	return path
}

// BenchmarkCopy100k copies 100,000 steps (1,000 sessions of 100) from
// SQLite into an empty PostgreSQL schema, and into an empty SQLite file,
// verification included; it reports steps/s.
func BenchmarkCopy100k(b *testing.B) {
	src := benchSource(b, 1000, 100)
	ctx := context.Background()
	run := func(b *testing.B, open func(b *testing.B) store.Store) {
		from, err := sqlite.Open(ctx, sqlite.Config{Path: src, ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		defer from.Close()
		var steps int64
		var elapsed time.Duration
		for b.Loop() {
			b.StopTimer()
			to := open(b)
			b.StartTimer()
			t0 := time.Now()
			rep, err := transfer.Copy(ctx, from, to, transfer.Options{})
			if err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(t0)
			steps += rep.Steps
			b.StopTimer()
			to.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
	}
	b.Run("SQLiteToPostgres", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		run(b, func(b *testing.B) store.Store {
			schema := freshSchema(b, dsn)
			st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			return st
		})
	})
	b.Run("SQLiteToSQLite", func(b *testing.B) {
		run(b, func(b *testing.B) store.Store {
			st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "dst.db")})
			if err != nil {
				b.Fatal(err)
			}
			return st
		})
	})
}

func freshSchema(b *testing.B, dsn string) string {
	r := make([]byte, 6)
	rand.Read(r)
	schema := "swbench_" + hex.EncodeToString(r)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
			c.Close(ctx)
		}
	})
	return schema
}
