package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/bench"
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

// isPostgresDSN reports whether a --db value names a PostgreSQL server.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openBenchPostgres opens a store on the server of dsn in a fresh schema
// that Close drops, so `stepwise bench --store postgres` leaves nothing
// behind.
func openBenchPostgres(ctx context.Context, dsn string) (bench.GroupCommitter, error) {
	schema := fmt.Sprintf("stepwise_bench_%d", time.Now().UnixNano())
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		return nil, err
	}
	return &tempSchema{Store: st, dsn: dsn, schema: schema}, nil
}

// tempSchema is a store whose schema is dropped when it closes.
type tempSchema struct {
	*postgres.Store
	dsn, schema string
}

func (t *tempSchema) Close() error {
	err := t.Store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, cerr := pgx.Connect(ctx, t.dsn)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	defer conn.Close(ctx)
	_, derr := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{t.schema}.Sanitize()+` CASCADE`)
	return errors.Join(err, derr)
}
