package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/vecindex"
)

// Store is a store.Store in a PostgreSQL schema, over a pgx connection
// pool. Any number of Stores, in any number of processes, may use the same
// schema at once.
type Store struct {
	cfg    Config
	schema string
	pool   *pgxpool.Pool
	lis    *listener

	closed    atomic.Bool
	closeOnce sync.Once

	vec vecindex.Spaces // in-process vector indexes (vector_index.go)

	group   committer // StepAppend's group commit (group.go)
	commits commits   // synchronous commits, for lazy writes (durable.go)
}

// The whole driver contract.
var _ store.Store = (*Store)(nil)

// Open connects to cfg.DSN, creates cfg.Schema when missing and runs the
// embedded migrations (a no-op when up to date; concurrent Opens of one
// schema wait for each other). A malformed configuration fails with
// store.ErrInvalid; a server that cannot be reached fails with an error
// that says so, within cfg.ConnectTimeout; a schema that holds foreign
// tables named like Stepwise's fails with store.ErrCorrupt.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pc, schema, err := cfg.poolConfig()
	if err != nil {
		return nil, err
	}
	if _, err := migrate(ctx, pc.ConnConfig, schema); err != nil {
		return nil, openErr(schema, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, openErr(schema, err)
	}
	s := &Store{cfg: cfg, schema: schema, pool: pool}
	s.lis = newListener(pc.ConnConfig)
	return s, nil
}

// Close stops every Listen subscription (closing their channels) and
// closes the pool, waiting for the connections in use to be returned.
// Later calls fail with ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.lis.close()
		// The pool's Close waits for every connection in use; one stuck in
		// a query to a database that does not answer (paused, a host gone
		// without a reset) would hold it forever.
		done := make(chan struct{})
		go func() { s.pool.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(CloseTimeout):
			err = fmt.Errorf("%w: postgres: close: %d connections still in use %v after close (the database does not answer): abandoned",
				store.ErrUnavailable, s.pool.Stat().AcquiredConns(), CloseTimeout)
		}
	})
	return err
}

// CloseTimeout bounds Store.Close: past it, connections still in use are
// abandoned (their queries end with the process) and Close reports them.
const CloseTimeout = 5 * time.Second

// Schema returns the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// SupportsListenNotify reports that Notify and Listen reach every Store on
// the same schema, in any process: true for PostgreSQL.
func (s *Store) SupportsListenNotify() bool { return true }

// usable fails when the store is closed.
func (s *Store) usable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Exclusive reports false: other processes may use the same schema, so a
// run leased to another owner may be alive elsewhere; the engine waits for
// the lease to expire instead of taking the run over at once.
func (s *Store) Exclusive() bool { return false }

// Health returns nil: a server that does not answer fails the calls
// themselves.
func (s *Store) Health(context.Context) error { return nil }
