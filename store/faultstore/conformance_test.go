package faultstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/faultstore"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// noFaults is a schedule that injects only what changes no outcome: a
// little latency on some calls.
var noFaults = faultstore.Config{Seed: 1, Latency: 0.05, MaxLatency: 200 * time.Microsecond}

// The conformance suite passes through the wrapper when it injects no
// fault that changes an outcome, over memory and SQLite.
func TestConformanceFaultsOff(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			inner := memory.New()
			t.Cleanup(func() { _ = inner.Close() })
			return faultstore.New(inner, noFaults)
		}, storetest.Options{Exclusive: true})
	})
	t.Run("sqlite", func(t *testing.T) {
		open := func(t *testing.T, path string) store.Store {
			inner, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = inner.Close() })
			return faultstore.New(inner, noFaults)
		}
		storetest.Run(t, func(t *testing.T) store.Store {
			return open(t, filepath.Join(t.TempDir(), "s.db"))
		}, storetest.Options{
			Exclusive: true,
			Reopen: func(t *testing.T, st store.Store) store.Store {
				path := st.(*faultstore.Store).Inner().(*sqlite.Store).Path()
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				return open(t, path)
			},
		})
	})
}

// A disabled schedule injects nothing, whatever its rates.
func TestDisabledInjectsNothing(t *testing.T) {
	t.Parallel()
	st := faultstore.New(memory.New(), faultstore.Config{Seed: 7, Error: 1, Ambiguous: 1, Full: 1, RenewFail: 1})
	st.SetEnabled(false)
	for i := range 50 {
		if _, err := st.SessionCreate(t.Context(), &store.SessionCreateParams{ID: "s" + string(rune('a'+i%26)) + string(rune('a'+i/26))}); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Injected(); len(got) != 0 {
		t.Fatalf("injected %v while disabled", got)
	}
}
