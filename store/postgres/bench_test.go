package postgres_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// BenchmarkStepAppendSingle: one goroutine, one step + run update per
// transaction.
func BenchmarkStepAppendSingle(b *testing.B) {
	storetest.BenchAppendSingle(b, openFresh(b))
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
