package cli

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
)

// The server CPU that `stepwise bench --store postgres` reports: the
// postmaster of a backend on this host is found, its CPU time grows with
// the work the backend does, and a process that is not a PostgreSQL
// backend has no postmaster.
func TestServerCPUOfLocalPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	if u, err := url.Parse(dsn); err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1") {
		t.Fatalf("STEPWISE_TEST_POSTGRES %q: the test needs the server on loopback (%v)", dsn, err)
	}
	if _, ok := postmasterOf(os.Getpid()); ok {
		t.Errorf("postmasterOf(the test process) found a postmaster")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	pm, ok := postmasterOf(backend)
	if !ok {
		t.Fatalf("postmasterOf(backend %d): not found, though the server is on loopback", backend)
	}
	before := serverCPU(pm)
	// About 0.3 s of the backend's CPU: well above the 10 ms tick.
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 10000000)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if after := serverCPU(pm); after-before < 50e6 {
		t.Errorf("server CPU grew by %v over a query of ~0.3 s of CPU (from %v)", after-before, before)
	}
}
