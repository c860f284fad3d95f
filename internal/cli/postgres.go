package cli

import (
	"context"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// openPostgres opens the PostgreSQL store of a "postgres://…" DSN. The
// schema is the DSN's search_path when it names one
// ("postgres://…/db?search_path=stepwise"), else "public"; it is created
// and migrated when missing.
var openPostgres = func(ctx context.Context, dsn string) (store.Store, error) {
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		return nil, err
	}
	return st, nil
}
