package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// freshSchema returns the name of a schema no other test uses, and drops
// it (with everything in it) when the test ends, after the stores the test
// opened are closed.
func freshSchema(t testing.TB) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "swtest_" + hex.EncodeToString(b)
	t.Cleanup(func() { dropSchema(t, dsn, schema) })
	return schema
}

func dropSchema(t testing.TB, dsn, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// open opens a store on schema and closes it when the test ends.
func open(t testing.TB, cfg postgres.Config) *postgres.Store {
	t.Helper()
	if cfg.DSN == "" {
		cfg.DSN = pgtest.DSN(t)
	}
	st, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open(schema %q): %v", cfg.Schema, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openFresh opens a store on a schema of its own.
func openFresh(t testing.TB) *postgres.Store {
	t.Helper()
	return open(t, postgres.Config{Schema: freshSchema(t)})
}

// rawConn connects to the test server outside any store.
func rawConn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// schemaConn is rawConn with its search_path set to schema, for reading
// and writing a store's tables directly.
func schemaConn(t testing.TB, schema string) *pgx.Conn {
	t.Helper()
	conn := rawConn(t)
	if _, err := conn.Exec(t.Context(), `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}
