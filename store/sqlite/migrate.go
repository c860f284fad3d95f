package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"

	"github.com/stepwise-run/stepwise/store"
)

// migrationFS holds the schema, one goose SQL file per version.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// versionTable records the applied migrations.
const versionTable = "stepwise_schema"

// migrate brings the schema of db up to date. It refuses a database that
// holds tables but no Stepwise schema, so a wrong path is never "migrated".
// Running it again is a no-op.
func migrate(ctx context.Context, db *sql.DB) (int64, error) {
	if err := checkOurs(ctx, db, false); err != nil {
		return 0, err
	}
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return 0, err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub,
		goose.WithTableName(versionTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	if err := checkNewer(ctx, p); err != nil {
		return 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrate: %w", mapErr(err))
	}
	return p.GetDBVersion(ctx)
}

// checkOurs fails with store.ErrCorrupt when db has tables but not ours;
// with needSchema, an empty database fails too (a read-only open cannot
// create the schema).
func checkOurs(ctx context.Context, db *sql.DB, needSchema bool) error {
	var tables, ours int
	err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE name = ?)
		FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`, versionTable).Scan(&tables, &ours)
	if err != nil {
		return mapErr(err)
	}
	if ours == 0 && (tables > 0 || needSchema) {
		return fmt.Errorf("%w: it has %d tables and no %s table", store.ErrCorrupt, tables, versionTable)
	}
	return nil
}
