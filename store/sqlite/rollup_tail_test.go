package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// The rollups and statistics, folded by the writer every few hundred steps
// (migration 00200), read as a recomputation from the steps at every
// moment; a kill before a fold (the files copied as they stand on disk,
// the store never closed) loses nothing: the copy reads exact, and folds
// its tail with its own later writes.
func TestRollupTailMatchesRecomputation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st := open(t, sqlite.Config{Path: path})
	storetest.RollupTail(t, st, "a", 1500)
	// Killed: the database and its WAL as they are, without the fold of
	// the close.
	crash := filepath.Join(dir, "crash.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crash+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	again := open(t, sqlite.Config{Path: crash})
	storetest.RollupTail(t, again, "b", 1200, "a")
}
