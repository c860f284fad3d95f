package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	} else if err := checkExists(path); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// checkExists tells a read-only command that there is no database at path
// yet, and how to make one, instead of a raw stat error.
func checkExists(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no database at %s yet; create one with `stepwise run --agent FILE --input TEXT` or `stepwise serve` (both with --db sqlite:%s)", path, path)
	case err != nil:
		return fmt.Errorf("database %s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("database %s is a directory; want a SQLite file", path)
	}
	return nil
}
