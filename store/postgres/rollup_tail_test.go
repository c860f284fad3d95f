package postgres_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// The rollups and statistics read as a recomputation from the steps after
// every few appends (the same check as SQLite's, whose rollups are folded
// in batches).
func TestRollupTailMatchesRecomputation(t *testing.T) {
	t.Parallel()
	st := open(t, postgres.Config{DSN: pgtest.DSN(t), Schema: freshSchema(t)})
	storetest.RollupTail(t, st, "a", 800)
}
