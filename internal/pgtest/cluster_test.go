package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/pgtest"
)

func ping(dsn string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	var n int
	return c.QueryRow(ctx, "SELECT 1").Scan(&n)
}

// A cluster of the test's own answers, stalls while paused (a query
// gets no answer), answers again once resumed, and after a restart.
func TestClusterPauseRestart(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCluster(t)
	if err := ping(c.DSN(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := ping(c.DSN(), 500*time.Millisecond); err == nil {
		t.Fatal("a paused cluster answered")
	}
	c.Resume()
	if err := ping(c.DSN(), 30*time.Second); err != nil {
		t.Fatalf("after resume: %v", err)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ping(c.DSN(), 30*time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
