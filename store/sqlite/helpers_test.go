package sqlite_test

import (
	"database/sql"
	"strconv"
	"testing"
)

func itoa(n int) string { return strconv.Itoa(n) }

// mustRawDB opens a plain SQLite connection, bypassing the store.
func mustRawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
