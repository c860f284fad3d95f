package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

func TestConfigInvalid(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 64)
	for name, cfg := range map[string]postgres.Config{
		"no DSN":             {},
		"malformed DSN":      {DSN: "not a dsn"},
		"bad sslmode":        {DSN: "postgres://u:hunter2@127.0.0.1:1/db?sslmode=bogus"},
		"negative MaxConns":  {DSN: "postgres://127.0.0.1:1/db", MaxConns: -1},
		"negative Retries":   {DSN: "postgres://127.0.0.1:1/db", Retries: -1},
		"negative timeout":   {DSN: "postgres://127.0.0.1:1/db", ConnectTimeout: -time.Second},
		"schema too long":    {DSN: "postgres://127.0.0.1:1/db", Schema: long},
		"schema with NUL":    {DSN: "postgres://127.0.0.1:1/db", Schema: "a\x00b"},
		"DSN search_path 2":  {DSN: "postgres://127.0.0.1:1/db?search_path=a,b"},
		"DSN search_path 64": {DSN: "postgres://127.0.0.1:1/db?search_path=" + long},
	} {
		_, err := postgres.Open(t.Context(), cfg)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error shows the password: %v", name, err)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: nothing listens, the connection is refused.
	_, err := postgres.Open(t.Context(), postgres.Config{DSN: "postgres://stepwise:hunter2@127.0.0.1:1/db?sslmode=disable", ConnectTimeout: 5 * time.Second})
	var ce *pgconn.ConnectError
	if err == nil || !errors.As(err, &ce) {
		t.Fatalf("Open(refused) = %v, want a *pgconn.ConnectError", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "cannot connect") || !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "hunter2") {
		t.Errorf("error %q should say it cannot connect, name the address and hide the password", msg)
	}
}

func TestOpenForeignTables(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	conn := rawConn(t)
	ctx := t.Context()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
		CREATE TABLE `+pgx.Identifier{schema, "sessions"}.Sanitize()+` (login text PRIMARY KEY);
		INSERT INTO `+pgx.Identifier{schema, "sessions"}.Sanitize()+` VALUES ('alice')`); err != nil {
		t.Fatal(err)
	}
	_, openErr := postgres.Open(ctx, postgres.Config{DSN: pgtest.DSN(t), Schema: schema})
	err := openErr
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), schema) {
		t.Fatalf("Open(schema with a foreign sessions table) = %v, want ErrCorrupt naming the schema", err)
	}
	var login string
	if err := conn.QueryRow(ctx, `SELECT login FROM `+pgx.Identifier{schema, "sessions"}.Sanitize()).Scan(&login); err != nil || login != "alice" {
		t.Errorf("foreign table changed: %q, %v", login, err)
	}
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables); err != nil || tables != 1 {
		t.Errorf("%d tables left in the schema (%v), want only the foreign one; open error: %v", tables, err, openErr)
	}
}

func TestOpenCreatesSchemaAndMigratesOnce(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	// Several processes opening a new schema at once: one migrates, the
	// others wait on the advisory lock and find the schema up to date.
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(t.Context(), postgres.Config{DSN: pgtest.DSN(t), Schema: schema, MaxConns: 2})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	conn := rawConn(t)
	files := migrationFiles(t)
	var applied, versions int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version_id) FROM `+pgx.Identifier{schema, "stepwise_schema"}.Sanitize()+
		` WHERE version_id > 0 AND is_applied`).Scan(&applied, &versions); err != nil || applied != len(files) || versions != len(files) {
		t.Errorf("%d migrations applied, %d distinct (%v); want each of the %d once", applied, versions, err, len(files))
	}
	var tables string
	if err := conn.QueryRow(t.Context(), `SELECT string_agg(tablename, ' ' ORDER BY tablename) FROM pg_tables
		WHERE schemaname = $1`, schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runs", "sessions", "steps", "stepwise_schema", "evals", "step_annotations", "blobs",
		"attachments", "step_events", "datasets", "dataset_items", "experiments", "experiment_items",
		"vector_embedders", "step_vectors"} {
		if !slices.Contains(strings.Fields(tables), want) {
			t.Errorf("table %s missing from the schema: %q", want, tables)
		}
	}
	// Every instance sees what another wrote.
	if _, err := stores[0].SessionCreate(t.Context(), &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[n-1].SessionGet(t.Context(), &store.SessionGetParams{ID: "s1"}); err != nil {
		t.Errorf("other instance: %v", err)
	}
}

func TestSchemaQuotingAndDSNSearchPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	odd := `Odd "Schema"-` + freshSchema(t)[len("swtest_"):]
	t.Cleanup(func() { dropSchema(t, pgtest.DSN(t), odd) })
	a := open(t, postgres.Config{Schema: odd})
	if a.Schema() != odd {
		t.Errorf("Schema() = %q, want %q", a.Schema(), odd)
	}
	plain := freshSchema(t)
	sep := "?"
	if strings.Contains(pgtest.DSN(t), "?") {
		sep = "&"
	}
	b := open(t, postgres.Config{DSN: pgtest.DSN(t) + sep + "search_path=" + plain})
	if b.Schema() != plain {
		t.Errorf("Schema() from the DSN's search_path = %q, want %q", b.Schema(), plain)
	}
	for _, st := range []*postgres.Store{a, b} {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "same-id"}); err != nil {
			t.Fatalf("%s: %v", st.Schema(), err)
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{{ID: "x-" + st.Schema(),
			SessionID: "same-id", Kind: steptype.KindUser, Status: steptype.StepCompleted}}}); err != nil {
			t.Fatalf("%s: %v", st.Schema(), err)
		}
	}
	var n int
	conn := rawConn(t)
	for _, schema := range []string{odd, plain} {
		err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "steps"}.Sanitize()).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("schema %q holds %d steps (%v), want 1", schema, n, err)
		}
	}
}

func TestSchemaDroppedUnderStore(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	dropSchema(t, pgtest.DSN(t), schema)
	_, err := st.SessionGet(t.Context(), &store.SessionGetParams{ID: "s1"})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("read from a dropped schema: %v, want ErrCorrupt", err)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	st := open(t, postgres.Config{Schema: freshSchema(t), Retries: 3})
	ctx := t.Context()
	for _, code := range []string{"40001", "40P01"} {
		pgErr := &pgconn.PgError{Code: code, Message: "synthetic " + code}
		n, err := st.TxAttempts(ctx, 2, pgErr)
		if err != nil || n != 3 {
			t.Errorf("%s twice: %d attempts, %v; want success on the third", code, n, err)
		}
		n, err = st.TxAttempts(ctx, 100, pgErr)
		if !errors.Is(err, store.ErrConflict) || n != 4 {
			t.Errorf("%s always: %d attempts, %v; want ErrConflict after 1+3 attempts", code, n, err)
		}
	}
	other := &pgconn.PgError{Code: "22P02", Message: "invalid input"}
	if n, err := st.TxAttempts(ctx, 100, other); n != 1 || !errors.As(err, new(*pgconn.PgError)) {
		t.Errorf("non-retryable error: %d attempts, %v; want 1 and the error", n, err)
	}
}

func TestMapErr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want error
	}{
		{pgx.ErrNoRows, store.ErrNotFound},
		{fmt.Errorf("wrapped: %w", pgx.ErrNoRows), store.ErrNotFound},
		{&pgconn.PgError{Code: "23505"}, store.ErrConflict},
		{&pgconn.PgError{Code: "23503"}, store.ErrConflict},
		{&pgconn.PgError{Code: "40001"}, store.ErrConflict},
		{&pgconn.PgError{Code: "40P01"}, store.ErrConflict},
		{&pgconn.PgError{Code: "42P01"}, store.ErrCorrupt},
		{&pgconn.PgError{Code: "3F000"}, store.ErrCorrupt},
		{context.Canceled, context.Canceled},
	} {
		if got := postgres.MapErr(c.err); !errors.Is(got, c.want) {
			t.Errorf("mapErr(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if postgres.MapErr(nil) != nil {
		t.Error("mapErr(nil) != nil")
	}
}

// migrationFiles lists the embedded migrations.
func migrationFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	return files
}

// The pool size comes from Config.MaxConns, else from the DSN's
// pool_max_conns (the only knob of `stepwise serve --db postgres://…`),
// else the default.
func TestPoolSizeFromDSN(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	withParam := func(v string) string {
		dsn := pgtest.DSN(t)
		if strings.Contains(dsn, "?") {
			return dsn + "&pool_max_conns=" + v
		}
		return dsn + "?pool_max_conns=" + v
	}
	for _, c := range []struct {
		cfg  postgres.Config
		want int32
	}{
		{postgres.Config{DSN: pgtest.DSN(t), Schema: schema}, postgres.DefaultMaxConns},
		{postgres.Config{DSN: withParam("3"), Schema: schema}, 3},
		{postgres.Config{DSN: withParam("3"), Schema: schema, MaxConns: 5}, 5},
	} {
		if got := open(t, c.cfg).PoolMaxConns(); got != c.want {
			t.Errorf("%+v: pool of %d connections, want %d", c.cfg, got, c.want)
		}
	}
}
