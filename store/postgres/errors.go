package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// ErrClosed is returned by every method of a closed Store.
var ErrClosed = rules.ErrClosed

// SQLSTATE codes the driver distinguishes.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeSerialization       = "40001"
	codeDeadlock            = "40P01"
	codeDuplicateTable      = "42P07"
	codeUndefinedTable      = "42P01"
	codeInvalidSchema       = "3F000"
	codeDiskFull            = "53100"
	codeAdminShutdown       = "57P01"
	codeCrashShutdown       = "57P02"
	codeCannotConnectNow    = "57P03"
)

// errRaced makes inTx run a transaction again: it lost a race that a
// fresh attempt resolves (a step id inserted concurrently by another
// session's append).
var errRaced = errors.New("stepwise: postgres: concurrent write, retrying")

// mapErr is the one place native errors become store sentinels:
//
//   - pgx.ErrNoRows → store.ErrNotFound;
//   - unique violation (23505) and foreign-key violation (23503) →
//     store.ErrConflict (an id already taken, a row still referenced);
//   - serialization failure (40001) and deadlock (40P01), once inTx has
//     exhausted its retries → store.ErrConflict;
//   - undefined table or schema (42P01, 3F000): the schema was dropped
//     under the store → store.ErrCorrupt;
//   - disk full (53100) → store.ErrStorageFull;
//   - a failed, lost or refused connection (connection exceptions, class
//     08; the server shutting down, 57P01–57P03; a network error) and a
//     context deadline → store.ErrUnavailable, saying so.
//
// Errors that already wrap a sentinel, and unknown errors, are returned
// unchanged.
func mapErr(err error) error {
	if err == nil || isSentinel(err) {
		return err
	}
	if errors.Is(err, errRaced) {
		return fmt.Errorf("%w: %v (retries exhausted)", store.ErrConflict, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %v", store.ErrNotFound, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeUniqueViolation, codeForeignKeyViolation:
			return fmt.Errorf("%w: %s", store.ErrConflict, pe.Message)
		case codeSerialization, codeDeadlock:
			return fmt.Errorf("%w: %s (retries exhausted)", store.ErrConflict, pe.Message)
		case codeUndefinedTable, codeInvalidSchema:
			return fmt.Errorf("%w: %s (was the schema dropped?)", store.ErrCorrupt, pe.Message)
		case codeDiskFull:
			return fmt.Errorf("%w: %s", store.ErrStorageFull, pe.Message)
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow:
			return fmt.Errorf("%w: postgres: %s", store.ErrUnavailable, pe.Message)
		}
		if strings.HasPrefix(pe.Code, "08") {
			return fmt.Errorf("%w: postgres: %s", store.ErrUnavailable, pe.Message)
		}
		return err
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: postgres: cannot connect (is the server running, is Config.DSN right?): %w", store.ErrUnavailable, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: postgres: no answer in time: %w", store.ErrUnavailable, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: postgres: connection lost: %w", store.ErrUnavailable, err)
	}
	return err
}

// retryable reports whether a transaction that failed with err may simply
// be run again: a serialization failure, a deadlock, a lost insert race, or
// a network error that happened before anything was sent.
func retryable(err error) bool {
	if errors.Is(err, errRaced) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == codeSerialization || pe.Code == codeDeadlock
	}
	return pgconn.SafeToRetry(err)
}

// pgError returns the server error in err, or nil.
func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// pgCode returns the SQLSTATE of err, or "".
func pgCode(err error) string {
	if pe := pgError(err); pe != nil {
		return pe.Code
	}
	return ""
}

func isSentinel(err error) bool {
	for _, s := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, store.ErrLocked,
		store.ErrCorrupt, store.ErrStorageFull, store.ErrUnavailable, ErrClosed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// openErr gives an Open failure its context: the schema, and a clear word
// for the common causes.
func openErr(schema string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeDuplicateTable {
		return fmt.Errorf("%w: postgres: schema %q already has a table Stepwise did not create (%s); set Config.Schema to a schema of its own",
			store.ErrCorrupt, schema, pe.Message)
	}
	if mapped := mapErr(err); mapped != err {
		return mapped
	}
	return fmt.Errorf("stepwise: postgres: open schema %q: %w", schema, err)
}
