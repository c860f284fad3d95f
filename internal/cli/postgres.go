package cli

import (
	"context"
	"errors"

	"github.com/stepwise-run/stepwise/store"
)

// openPostgres is replaced when the PostgreSQL driver lands.
var openPostgres = func(ctx context.Context, dsn string) (store.Store, error) {
	return nil, errors.New("postgres driver not available in this build")
}
