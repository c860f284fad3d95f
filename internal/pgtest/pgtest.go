// Package pgtest gives tests the PostgreSQL server they run against.
package pgtest

import (
	"os"
	"testing"
)

// DSN returns the server of env STEPWISE_TEST_POSTGRES. Without it the
// test is skipped, or fails under STEPWISE_REQUIRE_POSTGRES=1 (as in
// ./scripts/test and CI, which start a throwaway server and set both).
func DSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv("STEPWISE_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	const how = "set STEPWISE_TEST_POSTGRES=postgres://user@host:port/db?sslmode=disable to run the PostgreSQL tests " +
		"(./scripts/test starts a throwaway server and sets it)"
	if os.Getenv("STEPWISE_REQUIRE_POSTGRES") == "1" {
		t.Fatal("STEPWISE_REQUIRE_POSTGRES=1 but STEPWISE_TEST_POSTGRES is unset: " + how)
	}
	t.Skip(how)
	return ""
}
