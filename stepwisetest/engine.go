package stepwisetest

import (
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// NewEngine returns an engine built from cfg, closed when the test ends.
// A nil cfg.Store is a fresh in-memory store (e.Store() returns it); a nil
// cfg.Logger writes to t.Log until the engine is closed, so background
// errors show with the test that caused them.
func NewEngine(t testing.TB, cfg stepwise.Config) *stepwise.Engine {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = Memory(t)
	}
	if cfg.Logger == nil {
		w := &testLog{t: t}
		t.Cleanup(w.close) // after the engine's Close, which is registered below
		cfg.Logger = slog.New(slog.NewTextHandler(w, nil))
	}
	e, err := stepwise.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// testLog writes lines to t.Log until closed: a test must not log after it
// ended.
type testLog struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLog) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// Memory returns a fresh in-memory store, closed when the test ends.
func Memory(t testing.TB) store.Store {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// SQLite returns a store on a new SQLite file in t.TempDir(), closed when
// the test ends.
func SQLite(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "stepwise.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ForEachStore runs fn as a parallel subtest on a fresh store of each
// driver a test can open without a server: "memory" and "sqlite" (a file
// in the subtest's t.TempDir()).
func ForEachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Helper()
	for _, d := range []struct {
		name string
		open func(testing.TB) store.Store
	}{{"memory", Memory}, {"sqlite", SQLite}} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d.open(t))
		})
	}
}
