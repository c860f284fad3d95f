package postgres

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/stepwise-run/stepwise/store"
)

// migrationFS holds the schema, one goose SQL file per version.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// versionTable records the applied migrations, in the store's schema.
const versionTable = "stepwise_schema"

// migrate creates the schema when missing and brings its tables up to
// date, holding a PostgreSQL advisory lock keyed by the schema name, so
// that any number of processes can open the same schema at once: one
// migrates, the others wait and find nothing to do. It returns the schema
// version.
func migrate(ctx context.Context, cc *pgx.ConnConfig, schema string) (int64, error) {
	return migrateTo(ctx, cc, schema, math.MaxInt64)
}

// migrateTo is migrate up to version target (the tests build the schema of
// an earlier release with it).
func migrateTo(ctx context.Context, cc *pgx.ConnConfig, schema string, target int64) (int64, error) {
	// goose needs database/sql; this short-lived handle has the pool's
	// settings, search_path included: one connection holds the lock, goose
	// uses the other.
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	db.SetMaxOpenConns(2)
	lock, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer lock.Close()
	key := lockKey(schema)
	if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return 0, err
	}
	defer lock.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
	if err := createSchema(ctx, lock, schema); err != nil {
		return 0, err
	}
	if err := checkForeign(ctx, lock, schema); err != nil {
		return 0, err
	}
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return 0, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithTableName(versionTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	if err := checkNewer(ctx, p); err != nil {
		return 0, err
	}
	if _, err := p.UpTo(ctx, target); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return p.GetDBVersion(ctx)
}

// createSchema creates schema unless it exists. Existence is checked
// first, so a role without CREATE on the database can open a schema made
// for it.
func createSchema(ctx context.Context, conn *sql.Conn, schema string) error {
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err := conn.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoteIdent(schema))
	return err
}

// checkForeign refuses a schema that has tables named like ours but no
// version table: they belong to someone else. Nothing is created then.
func checkForeign(ctx context.Context, conn *sql.Conn, schema string) error {
	var ours bool
	var clash string
	err := conn.QueryRowContext(ctx, `SELECT
		COALESCE(bool_or(tablename = $2), false),
		COALESCE(string_agg(tablename, ', ' ORDER BY tablename) FILTER (WHERE tablename IN ('sessions', 'steps', 'runs')), '')
		FROM pg_tables WHERE schemaname = $1`, schema, versionTable).Scan(&ours, &clash)
	if err != nil {
		return err
	}
	if !ours && clash != "" {
		return fmt.Errorf("%w: postgres: schema %q already has table(s) %s that Stepwise did not create; set Config.Schema to a schema of its own",
			store.ErrCorrupt, schema, clash)
	}
	return nil
}

// lockKey is the advisory lock key of a schema's migrations.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("stepwise migrate\x00" + schema))
	return int64(h.Sum64())
}
