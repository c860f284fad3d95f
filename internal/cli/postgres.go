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
	t := &tempSchema{Store: st, dsn: dsn, schema: schema}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, errors.Join(err, t.Close())
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	t.postmaster, t.local = postmasterOf(backend)
	return t, nil
}

// tempSchema is a store whose schema is dropped when it closes.
type tempSchema struct {
	*postgres.Store
	dsn, schema string
	// postmaster is the server's process when it runs on this host
	// (local): the bench then reports the server's CPU per step.
	postmaster int
	local      bool
}

// ServerCPU implements bench.ServerCPUReporter: the CPU time of the
// server's processes so far, when the server runs on this host.
func (t *tempSchema) ServerCPU() (time.Duration, bool) {
	if !t.local {
		return 0, false
	}
	return serverCPU(t.postmaster), true
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
