package stepwisetest

import (
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// NewEngine returns an engine built from cfg, closed when the test ends.
// A nil cfg.Store is a fresh in-memory store; e.Store() returns the store
// either way.
func NewEngine(t testing.TB, cfg stepwise.Config) *stepwise.Engine {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = Memory(t)
	}
	e, err := stepwise.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
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
