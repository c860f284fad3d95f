package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// MigrateTo creates cfg's schema as migrations 1..version leave it, as an
// earlier release would have, and returns the version reached.
func MigrateTo(ctx context.Context, cfg Config, version int64) (int64, error) {
	cfg = cfg.WithDefaults()
	pc, schema, err := cfg.poolConfig()
	if err != nil {
		return 0, err
	}
	return migrateTo(ctx, pc.ConnConfig, schema, version)
}

// MapErr exposes mapErr to the tests.
var MapErr = mapErr

// TxAttempts runs a transaction whose function fails with err on its
// first failures attempts, and reports how many attempts ran.
func (s *Store) TxAttempts(ctx context.Context, failures int, err error) (int, error) {
	n := 0
	_, txErr := inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		n++
		if n <= failures {
			return struct{}{}, err
		}
		_, err := tx.Exec(ctx, `SELECT 1`)
		return struct{}{}, err
	})
	return n, txErr
}

// VectorRowsLoaded reports how many vector rows the store's index of
// embedder has read from the database so far (0 before its first search).
func (s *Store) VectorRowsLoaded(embedder string) int64 {
	return s.vec.Loaded(embedder)
}

// PoolMaxConns reports the size limit of the store's pool.
func (s *Store) PoolMaxConns() int32 { return s.pool.Config().MaxConns }

// GroupQueued reports how many appends wait for the group commit in
// flight.
func (s *Store) GroupQueued() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}

// GroupInFlight reports how many group commits are in flight.
func (s *Store) GroupInFlight() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return s.group.inFlight
}

// MaxInFlight is how many group commits a Store has in flight at most.
const MaxInFlight = maxInFlight

// The statements that write a session's last_seq, totals and updated_at
// with each append: alone, and for a group.
const (
	SessionTotalsSQL     = sessionTotalsSQL
	SessionTotalsManySQL = sessionTotalsManySQL
)

// FastArraysRegistered reports whether a pooled connection encodes the
// arrays of fastArrayOIDs with fastArrays.
func (s *Store) FastArraysRegistered(ctx context.Context) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	for oid := range fastArrayOIDs {
		t, ok := conn.Conn().TypeMap().TypeForOID(oid)
		if !ok {
			return false, nil
		}
		if _, ok := t.Codec.(fastArrays); !ok {
			return false, nil
		}
	}
	return true, nil
}

// ReadRuns reads the runs of ids (sorted) as a group does and as scanRuns
// does, and reports the allocations of each read (query included).
func (s *Store) ReadRuns(ctx context.Context, ids, sessionIDs []string) (group, plain []*steptype.Run, groupAllocs, plainAllocs float64, err error) {
	read := func(scan func(pgx.Rows) ([]*steptype.Run, error)) ([]*steptype.Run, error) {
		rows, err := s.pool.Query(ctx, `SELECT `+sqlrow.RunCols+` FROM runs WHERE id = ANY($1) ORDER BY id`, ids)
		if err != nil {
			return nil, err
		}
		return scan(rows)
	}
	groupScan := func(rows pgx.Rows) ([]*steptype.Run, error) { return scanGroupRuns(rows, ids, sessionIDs) }
	if group, err = read(groupScan); err != nil {
		return
	}
	if plain, err = read(scanRuns); err != nil {
		return
	}
	groupAllocs = testing.AllocsPerRun(20, func() { _, _ = read(groupScan) })
	plainAllocs = testing.AllocsPerRun(20, func() { _, _ = read(scanRuns) })
	return
}

// ReadSessions reads the sessions of ids (sorted) as a group does and as
// scanSession does, and reports the allocations of each read.
func (s *Store) ReadSessions(ctx context.Context, ids []string) (group, plain []*steptype.Session, groupAllocs, plainAllocs float64, err error) {
	read := func(grouped bool) ([]*steptype.Session, error) {
		rows, err := s.pool.Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ANY($1) ORDER BY id`, ids)
		if err != nil {
			return nil, err
		}
		var out []*steptype.Session
		if grouped {
			err = scanGroupSessions(rows, ids, func(s *steptype.Session) { out = append(out, s) })
			return out, err
		}
		defer rows.Close()
		for rows.Next() {
			s, err := scanSession(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, rows.Err()
	}
	if group, err = read(true); err != nil {
		return
	}
	if plain, err = read(false); err != nil {
		return
	}
	groupAllocs = testing.AllocsPerRun(20, func() { _, _ = read(true) })
	plainAllocs = testing.AllocsPerRun(20, func() { _, _ = read(false) })
	return
}

// PlanCounts reports the generic and custom plans made so far for each
// statement prepared on one of the store's connections
// (pg_prepared_statements of that session): with MaxConns 1, all of them.
func (s *Store) PlanCounts(ctx context.Context) (map[string][2]int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		return nil, err
	}
	out := map[string][2]int64{}
	for rows.Next() {
		var q string
		var g, c int64
		if err := rows.Scan(&q, &g, &c); err != nil {
			return nil, err
		}
		out[q] = [2]int64{g, c}
	}
	return out, rows.Err()
}
