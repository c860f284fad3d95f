package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/store/storetest"
)

func benchOpen(b *testing.B, sync string) store.Store {
	st, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkStepAppendSingle: one goroutine, one step + run update per
// transaction.
func BenchmarkStepAppendSingle(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		b.Run(sync, func(b *testing.B) { storetest.BenchAppendSingle(b, benchOpen(b, sync)) })
	}
}

// BenchmarkStepAppendConcurrent: 100 goroutines, each appending to its own
// session and run (group commit).
func BenchmarkStepAppendConcurrent(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		b.Run(sync, func(b *testing.B) { storetest.BenchAppendConcurrent(b, benchOpen(b, sync), 100, false) })
	}
}
