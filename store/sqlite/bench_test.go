package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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

// BenchmarkTaskCycle: a worker task created, claimed and finished.
func BenchmarkTaskCycle(b *testing.B) {
	storetest.BenchTaskCycle(b, benchOpen(b, "NORMAL"))
}

// BenchmarkTaskHandover: a worker task created lazily, claimed, and
// finished with Visible, as the worker service writes it.
func BenchmarkTaskHandover(b *testing.B) {
	storetest.BenchTaskHandover(b, benchOpen(b, "NORMAL"))
}

// BenchmarkStepAppendConcurrent: 100 goroutines, each appending to its own
// session and run (group commit).
func BenchmarkStepAppendConcurrent(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		b.Run(sync, func(b *testing.B) { storetest.BenchAppendConcurrent(b, benchOpen(b, sync), 100, false) })
	}
}

// BenchmarkVectors: top-10 over 100,000 256-dimensional step vectors, the
// first search of a new store on the file (loads them all), and the search
// after another store added one (incremental refresh). One fill, three
// sub-benchmarks: run with -run '^$' -bench Vectors -benchtime 20x.
func BenchmarkVectors(b *testing.B) {
	const n, dim = 100_000, 256
	path := filepath.Join(b.TempDir(), "vec.db")
	st := benchOpenPath(b, sqlite.Config{Path: path})
	start := time.Now()
	storetest.BenchVectorFill(b, st, n, dim)
	b.Logf("stored %d vectors in %v", n, time.Since(start))
	reader := func(b *testing.B) store.Store {
		o, err := sqlite.Open(b.Context(), sqlite.Config{Path: path, ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	// The file has one writer, st; searches run on a read-only store (as
	// another process would), which follows st's writes.
	r := reader(b)
	b.Cleanup(func() { r.Close() })
	storetest.BenchVectors(b, r, reader, func(*testing.B) store.Store { return st }, dim)
}

// BenchmarkStepBytes appends realistic turns (an llm step calling a tool,
// the tool's step; each with its run update), without and with a
// 256-dimensional vector per step, and reports the growth of the
// database file, checkpointed (the store closed), per step. Run with
// -benchtime 5000x.
func BenchmarkStepBytes(b *testing.B) {
	b.Run("steps", func(b *testing.B) { benchStepBytes(b, 0) })
	b.Run("steps+vectors", func(b *testing.B) { benchStepBytes(b, 256) })
}

func benchStepBytes(b *testing.B, dim int) {
	path := filepath.Join(b.TempDir(), "bytes.db")
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	empty, err := sqlite.Open(b.Context(), sqlite.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	empty.Close()
	before := size()
	st := benchOpenPath(b, sqlite.Config{Path: path})
	steps := storetest.BenchTurn(b, st, dim)
	st.Close()
	b.ReportMetric(float64(size()-before)/float64(steps), "bytes/step")
}

func benchOpenPath(b *testing.B, cfg sqlite.Config) store.Store {
	st, err := sqlite.Open(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
