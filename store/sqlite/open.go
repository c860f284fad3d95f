package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// Store is a store.Store in one SQLite file. All writes go through one
// writer goroutine that group-commits them; reads use a pool of read-only
// connections and never wait for the writer (WAL).
type Store struct {
	cfg  Config
	path string // absolute
	lock *fileLock
	wdb  *sql.DB // writer pool of one connection; nil when read-only
	rdb  *sql.DB // reader pool
	w    *writer // nil when read-only

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	vec vecindex.Spaces // in-process vector indexes (vector.go)

	ident *fileIdent // the opened file's identity; nil when read-only
}

// The whole driver contract.
var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path, runs the
// embedded migrations and starts the writer. A second writer on the same
// file, in this process or another, fails with an error wrapping
// store.ErrLocked that names the holder's pid; a file that is not a
// Stepwise database fails with store.ErrCorrupt.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: sqlite: path %q: %v", store.ErrInvalid, cfg.Path, err)
	}
	s := &Store{cfg: cfg, path: abs}
	if err := s.open(ctx); err != nil {
		s.release()
		return nil, openErr(abs, err)
	}
	return s, nil
}

func (s *Store) open(ctx context.Context) error {
	var err error
	if s.cfg.ReadOnly {
		return s.openReadOnly(ctx)
	}
	if s.lock, err = lockPath(s.path); err != nil {
		return err
	}
	switch state, tables, err := fileState(ctx, s.path, true); {
	case err != nil:
		return err
	case state == stateForeign:
		return foreignErr(tables)
	case state == stateUnborn:
		if err := s.createAtomically(ctx); err != nil {
			return fmt.Errorf("create the database: %w", err)
		}
	}
	if s.wdb, err = sql.Open("sqlite", s.cfg.dsn(s.path, true)); err != nil {
		return err
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if _, err := migrate(ctx, s.wdb); err != nil {
		return err
	}
	if s.rdb, err = sql.Open("sqlite", s.cfg.dsn(s.path, false)); err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(s.cfg.Readers)
	s.rdb.SetMaxIdleConns(s.cfg.Readers)
	if s.ident, err = newFileIdent(s.path); err != nil {
		return err
	}
	s.w, err = startWriter(ctx, s.wdb)
	return err
}

// openErr gives an Open failure its path and a sentinel.
func openErr(path string, err error) error {
	var le *lockedError
	if errors.As(err, &le) {
		return err
	}
	mapped := mapErr(err)
	if errors.Is(mapped, store.ErrCorrupt) {
		cause := strings.TrimPrefix(err.Error(), store.ErrCorrupt.Error()+": ")
		return fmt.Errorf("%w: %s: %s", store.ErrCorrupt, path, cause)
	}
	return fmt.Errorf("stepwise: open %s: %w", path, mapped)
}

// release frees whatever open acquired, writer first, lock last.
func (s *Store) release() error {
	var errs []error
	if s.w != nil {
		errs = append(errs, s.w.stop())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	errs = append(errs, s.lock.release())
	return errors.Join(errs...)
}

// Close waits for the writes already submitted, closes every connection and
// releases the lock file. Later calls fail with ErrClosed. Close is
// idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = s.release()
	})
	return s.closeErr
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// usable fails when the store is closed.
func (s *Store) usable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}
