package cli

import (
	"context"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// openPostgres opens the PostgreSQL store of a "postgres://…" DSN (schema from the
// DSN's search_path when it names one, else "public"; created and migrated when missing).
func openPostgres(ctx context.Context, dsn string) (store.Store, error) {
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		return nil, err
	}
	return st, nil
}
