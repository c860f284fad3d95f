package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// openStore opens a store from a DSN: "sqlite:PATH" (or a bare path),
// "memory:", or "postgres://…".
func openStore(ctx context.Context, dsn string, readOnly bool) (store.Store, error) {
	switch {
	case dsn == "memory:" || dsn == "memory":
		return memory.New(), nil
	case isPostgresDSN(dsn):
		return openPostgres(ctx, dsn)
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	if path == "" {
		return nil, usagef("--db %q: want sqlite:PATH, postgres://… or memory:", dsn)
	}
	if !readOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	return st, nil
}
