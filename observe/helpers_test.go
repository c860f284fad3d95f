package observe_test

import (
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// stores returns a fresh SQLite store (a file in t.TempDir()) and a memory
// store, by name.
func stores(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"memory": func(t *testing.T) store.Store {
			st := memory.New()
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// forEachStore runs fn as a parallel subtest per store.
func forEachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}

// seed creates session s, run r, and committed steps with the given ids.
func seed(t *testing.T, st store.Store, steps ...*steptype.Step) {
	t.Helper()
	if _, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "s", Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(t.Context(), &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		s.SessionID, s.RunID = "s", "r"
		if s.Kind == "" {
			s.Kind = steptype.KindCustom
		}
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{s}}); err != nil {
			t.Fatal(err)
		}
	}
}
