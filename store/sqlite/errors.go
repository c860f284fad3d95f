package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// ErrReadOnly is returned by every write of a store opened with
// Config.ReadOnly.
var ErrReadOnly = errors.New("stepwise: store opened read-only")

// ErrClosed is returned by every method of a closed Store.
var ErrClosed = rules.ErrClosed

// SQLite primary result codes (the low byte of an extended code).
const (
	codeCorrupt    = 11
	codeNotADB     = 26
	codeBusy       = 5
	codeLocked     = 6
	codeConstraint = 19
	codeFull       = 13
	codeIOErr      = 10
	codeCantOpen   = 14
	// Extended constraint codes that mean "already exists".
	codeConstraintPrimaryKey = 1555
	codeConstraintUnique     = 2067
)

// mapErr is the one place native errors become store sentinels: no rows →
// ErrNotFound, unique or primary-key violation → ErrConflict, busy or
// locked → ErrLocked, not a database or malformed → ErrCorrupt, full (disk
// or Config.MaxBytes) → ErrStorageFull, an I/O error or a file that cannot
// be opened → ErrUnavailable, a context deadline → ErrUnavailable. Errors
// that already wrap a sentinel, and unknown errors, are returned unchanged.
func mapErr(err error) error {
	if err == nil || isSentinel(err) {
		return err
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %v", store.ErrNotFound, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		if strings.Contains(err.Error(), "file is not a database") {
			return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
		return err
	}
	code := coded.Code()
	switch {
	case code == codeConstraintUnique || code == codeConstraintPrimaryKey:
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	case code&0xff == codeBusy || code&0xff == codeLocked:
		return fmt.Errorf("%w: %v", store.ErrLocked, err)
	case code&0xff == codeCorrupt || code&0xff == codeNotADB:
		return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	case code&0xff == codeFull:
		return fmt.Errorf("%w: %v", store.ErrStorageFull, err)
	case code&0xff == codeIOErr || code&0xff == codeCantOpen:
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	return err
}

func isSentinel(err error) bool {
	for _, s := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, store.ErrLocked,
		store.ErrCorrupt, store.ErrStorageFull, store.ErrUnavailable, ErrReadOnly, ErrClosed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// lockedError reports that another process holds the database's lock file.
type lockedError struct {
	path string
	pid  string
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("stepwise: database %s is in use by another stepwise process (pid %s)", e.path, e.pid)
}

func (e *lockedError) Unwrap() error { return store.ErrLocked }
