package eval_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// forEachStore runs fn as a parallel subtest with a fresh SQLite store (a
// file in t.TempDir()) and with a fresh memory store.
func forEachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for _, name := range []string{"sqlite", "memory"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var st store.Store = memory.New()
			if name == "sqlite" {
				var err error
				if st, err = sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")}); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { st.Close() })
			fn(t, st)
		})
	}
}

func run(t *testing.T, e *stepwise.Engine, agent, input string) *stepwise.Run {
	t.Helper()
	r, err := e.Wait(t.Context(), e.Run(t.Context(), stepwise.StartParams{Agent: agent, Input: input}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
