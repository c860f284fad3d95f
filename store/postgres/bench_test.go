package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store"

	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// BenchmarkStepAppendSingle: one goroutine, one step + run update per
// transaction.
func BenchmarkStepAppendSingle(b *testing.B) {
	storetest.BenchAppendSingle(b, openFresh(b))
}

// BenchmarkTaskCycle: a worker task created, claimed and finished.
func BenchmarkTaskCycle(b *testing.B) {
	storetest.BenchTaskCycle(b, openFresh(b))
}

// BenchmarkTaskHandover: a worker task created lazily, claimed, and
// finished with Visible, as the worker service writes it.
func BenchmarkTaskHandover(b *testing.B) {
	storetest.BenchTaskHandover(b, openFresh(b))
}

// BenchmarkStepAppendConcurrent: 100 goroutines, each appending to its own
// session and run, through pools of 10 (the default) and 50 connections.
// "shared" has the 100 goroutines append to one session: they queue on its
// row lock.
func BenchmarkStepAppendConcurrent(b *testing.B) {
	for _, c := range []struct {
		name   string
		conns  int32
		shared bool
	}{{"conns=10", 10, false}, {"conns=50", 50, false}, {"conns=10/shared", 10, true}} {
		b.Run(c.name, func(b *testing.B) {
			st := open(b, postgres.Config{Schema: freshSchema(b), MaxConns: c.conns})
			storetest.BenchAppendConcurrent(b, st, 100, c.shared)
		})
	}
}

// BenchmarkVectors: top-10 over 100,000 256-dimensional step vectors, the
// first search of a new instance (loads them all), and the search after
// another instance added one (incremental refresh). One fill, three
// sub-benchmarks: run with -run '^$' -bench Vectors -benchtime 20x.
func BenchmarkVectors(b *testing.B) {
	const n, dim = 100_000, 256
	schema := freshSchema(b)
	st := open(b, postgres.Config{Schema: schema})
	start := time.Now()
	storetest.BenchVectorFill(b, st, n, dim)
	b.Logf("stored %d vectors in %v", n, time.Since(start))
	other := func(b *testing.B) store.Store {
		o, err := postgres.Open(b.Context(), postgres.Config{DSN: pgtest.DSN(b), Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	storetest.BenchVectors(b, st, other, func(b *testing.B) store.Store { return open(b, postgres.Config{Schema: schema}) }, dim)
}

// BenchmarkStepBytes appends realistic turns (an llm step calling a tool,
// the tool's step; each with its run update), without and with a
// 256-dimensional vector per step, and reports the growth of
// the schema's relations, indexes and TOAST included
// (pg_total_relation_size), per step. Run with -benchtime 5000x.
func BenchmarkStepBytes(b *testing.B) {
	b.Run("steps", func(b *testing.B) { benchStepBytes(b, 0) })
	b.Run("steps+vectors", func(b *testing.B) { benchStepBytes(b, 256) })
}

func benchStepBytes(b *testing.B, dim int) {
	schema := freshSchema(b)
	st := open(b, postgres.Config{Schema: schema})
	size := func() int64 {
		var n int64
		err := rawConn(b).QueryRow(context.Background(), `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
			FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
			WHERE ns.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	before := size()
	steps := storetest.BenchTurn(b, st, dim)
	b.ReportMetric(float64(size()-before)/float64(steps), "bytes/step")
}
