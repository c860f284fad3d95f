package postgres_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// Every connection of a Store's pool encodes the statements' arrays with
// the driver's encoder (registered when the connection is made).
func TestFastArraysOnPool(t *testing.T) {
	t.Parallel()
	st := open(t, postgres.Config{DSN: pgtest.DSN(t), Schema: freshSchema(t)})
	ok, err := st.FastArraysRegistered(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("a pooled connection encodes arrays with pgx's codec, not fastArrays")
	}
}
