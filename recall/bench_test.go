package recall_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

var vocabulary = strings.Fields(`deploy billing service production staging migration postgres lock timeout invoice
customer refund payment retry queue worker kafka topic consumer lag disk full memory leak cpu spike latency
error warning failed succeeded rollback release notes changelog test flaky build cache docker image registry
kubernetes pod restart crash loop config secret token expired auth login user account email notification
report dashboard metric alert page oncall incident postmortem search index vector embedding model prompt`)

// syntheticText is a random sentence of 6 to 30 words.
func syntheticText(r *rand.Rand) string {
	n := 6 + r.IntN(25)
	w := make([]string, n)
	for i := range w {
		w[i] = vocabulary[r.IntN(len(vocabulary))]
	}
	return strings.Join(w, " ")
}

// fillSteps stores n tool steps with synthetic texts, 1,000 per session.
func fillSteps(b *testing.B, st store.Store, n int) {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, uint64(n)))
	for s := 0; s*1000 < n; s++ {
		sid := fmt.Sprintf("s%04d", s)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "bench"}); err != nil {
			b.Fatal(err)
		}
		var steps []*steptype.Step
		for i := s * 1000; i < min(n, (s+1)*1000); i++ {
			steps = append(steps, &steptype.Step{ID: fmt.Sprintf("st%07d", i), SessionID: sid, RunID: "r", Kind: steptype.KindTool,
				Status: steptype.StepCompleted, ToolName: "shell", Content: syntheticText(r)})
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkSearch measures a top-10 search over n stored step vectors of
// dimension 256 in SQLite: embedding the query (lexical), the in-process
// exact scan, and reading the 10 steps. The index is loaded before timing;
// BenchmarkIndexLoad measures that first load.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("vectors=%d/dim=256/k=10", n), func(b *testing.B) {
			st := benchStore(b)
			fillSteps(b, st, n)
			emb := recall.DefaultEmbedder()
			if _, err := recall.Backfill(context.Background(), recall.WorkerConfig{Store: st, Embedder: emb, BatchSize: 512}); err != nil {
				b.Fatal(err)
			}
			q := recall.Query{Texts: []string{"postgres migration failed with a lock timeout"}, K: 10}
			if res, err := recall.Search(context.Background(), st, emb, q); err != nil || len(res.Steps) != 10 {
				b.Fatalf("warm-up: %v", err)
			}
			b.Run("recall.Search", func(b *testing.B) {
				for b.Loop() {
					if _, err := recall.Search(context.Background(), st, emb, q); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("filtered/agent+kind", func(b *testing.B) {
				q := q
				q.Agent, q.Kinds = "bench", []steptype.Kind{steptype.KindTool}
				for b.Loop() {
					if _, err := recall.Search(context.Background(), st, emb, q); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("IndexLoad", func(b *testing.B) {
				path := st.Path()
				for b.Loop() {
					ro, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, ReadOnly: true})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := recall.Search(context.Background(), ro, emb, q); err != nil {
						b.Fatal(err)
					}
					ro.Close()
				}
			})
		})
	}
}

// BenchmarkBackfill measures embedding an existing database: 10,000 steps
// read, embedded with the lexical embedder and stored, per iteration.
func BenchmarkBackfill(b *testing.B) {
	const n = 10_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := benchStore(b)
		fillSteps(b, st, n)
		b.StartTimer()
		start := time.Now()
		stats, err := recall.Backfill(context.Background(), recall.WorkerConfig{Store: st, Embedder: recall.DefaultEmbedder()})
		if err != nil || stats.Embedded != n {
			b.Fatalf("backfill: %+v, %v", stats, err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "steps/s")
	}
}

// BenchmarkLexical measures the lexical embedder on a typical step text.
func BenchmarkLexical(b *testing.B) {
	emb := recall.DefaultEmbedder()
	r := rand.New(rand.NewPCG(1, 1))
	texts := []string{syntheticText(r) + " " + syntheticText(r)}
	for b.Loop() {
		if _, err := emb.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
}
