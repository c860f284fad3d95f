package postgres_test

import (
	"testing"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
	"github.com/stepwise-run/stepwise/store/storetest"
)

// TestConformance runs the store suite, each subtest on a fresh schema.
func TestConformance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, postgres.Config{DSN: dsn, Schema: freshSchema(t)})
	}, storetest.Options{
		Notifier: true,
		Reopen: func(t *testing.T, st store.Store) store.Store {
			schema := st.(*postgres.Store).Schema()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, postgres.Config{DSN: dsn, Schema: schema})
		},
	})
}
