package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/stepwise-run/stepwise/store"
)

// dbState is what a database file holds.
type dbState int

const (
	// stateUnborn: no file, an empty file, or a creation that was
	// interrupted before its schema committed (at most goose's version
	// table). It holds no data.
	stateUnborn dbState = iota
	// stateOurs: a Stepwise database (perhaps of an older version).
	stateOurs
	// stateForeign: tables, none of them ours.
	stateForeign
)

// inspect reads the state of the database behind db.
func inspect(ctx context.Context, db *sql.DB) (dbState, int, error) {
	var tables, version, sessions int
	err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE name = ?), count(*) FILTER (WHERE name = 'sessions')
		FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`, versionTable).Scan(&tables, &version, &sessions)
	switch {
	case err != nil:
		return 0, 0, err
	case sessions == 0 && tables == version:
		return stateUnborn, tables, nil
	case version == 0:
		return stateForeign, tables, nil
	}
	return stateOurs, tables, nil
}

// fileState inspects the database file at path without creating it. rw
// opens it writable (under the writer lock), which lets SQLite recover a
// write-ahead log left by a killed process.
func fileState(ctx context.Context, path string, rw bool) (dbState, int, error) {
	if fi, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return stateUnborn, 0, nil
	} else if err != nil {
		return 0, 0, err
	}
	mode := "ro"
	if rw {
		mode = "rw"
	}
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?mode="+mode+"&_pragma=busy_timeout(5000)")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return inspect(ctx, db)
}

// createAtomically gives an unborn database its schema in one step: the
// schema is built in a temporary file next to it, which is then renamed
// over it, so that any reader, in any process, sees either no database or
// a complete one — never a half-created one. The caller holds the writer
// lock.
func (s *Store) createAtomically(ctx context.Context) error {
	tmp := s.path + ".creating"
	removeDB(tmp)
	db, err := sql.Open("sqlite", s.cfg.dsn(tmp, true))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	if _, err := migrate(ctx, db); err != nil {
		db.Close()
		removeDB(tmp)
		return err
	}
	// Closing the last connection checkpoints the log into the file and
	// deletes it: the file alone is the database.
	if err := db.Close(); err != nil {
		removeDB(tmp)
		return err
	}
	if _, err := os.Stat(tmp + "-wal"); err == nil {
		removeDB(tmp)
		return fmt.Errorf("%w: sqlite: the new database kept its write-ahead log", store.ErrCorrupt)
	}
	// The log and index of the interrupted creation describe the file
	// being replaced: they must not be applied to the new one.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(s.path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	return syncFile(filepath.Dir(s.path))
}

func foreignErr(tables int) error {
	return fmt.Errorf("%w: it has %d tables and no %s table", store.ErrCorrupt, tables, versionTable)
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(path + suffix)
	}
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// emptySeq names the in-memory databases of empty read-only views.
var emptySeq atomic.Int64

// openEmptyView backs a read-only store whose file holds no data yet (it
// does not exist, is empty, or its creation was interrupted) with a private
// in-memory database with the schema: every read answers "nothing yet"
// instead of failing.
func (s *Store) openEmptyView(ctx context.Context) error {
	name := fmt.Sprintf("file:stepwise-empty-%d-%d?mode=memory&cache=shared", os.Getpid(), emptySeq.Add(1))
	keep, err := sql.Open("sqlite", name)
	if err != nil {
		return err
	}
	keep.SetMaxOpenConns(1)
	keep.SetConnMaxLifetime(0)
	keep.SetConnMaxIdleTime(0)
	s.wdb = keep // holds the in-memory database open until Close
	if _, err := migrate(ctx, keep); err != nil {
		return err
	}
	if s.rdb, err = sql.Open("sqlite", name+"&_pragma=query_only(1)"); err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(s.cfg.Readers)
	return nil
}

// openReadOnly opens the readers of a read-only store. A database with no
// data yet reads as empty. A write-ahead log left by a killed writer needs
// a writable connection to be recovered: when no writer holds the file,
// the recovery is made under the writer lock, then released.
func (s *Store) openReadOnly(ctx context.Context) error {
	state, tables, err := fileState(ctx, s.path, false)
	if err != nil {
		if lock, lerr := lockPath(s.path); lerr == nil {
			state, tables, err = fileState(ctx, s.path, true)
			lock.release()
		}
	}
	if err != nil {
		return err
	}
	switch state {
	case stateUnborn:
		return s.openEmptyView(ctx)
	case stateForeign:
		return foreignErr(tables)
	}
	if s.rdb, err = sql.Open("sqlite", s.cfg.dsn(s.path, false)); err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(s.cfg.Readers)
	s.rdb.SetMaxIdleConns(s.cfg.Readers)
	return checkOurs(ctx, s.rdb, true)
}
