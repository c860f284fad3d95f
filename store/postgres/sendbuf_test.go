package postgres

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/internal/raceflag"
)

// A batch larger than pgx's 1 KB write buffer (a group's write round trip:
// ~25 step bodies) is written into the connection's send buffer, made once,
// instead of a write buffer regrown from 1 KB by doubling for every batch;
// what the server receives is unchanged.
func TestSendBufferReused(t *testing.T) {
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = registerFastArrays
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx := &wtx{conn: conn}
	defer func() { _, _ = conn.Exec(context.Background(), `ROLLBACK`) }()
	bodies := make([][]byte, 30)
	var total int64
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{'a' + byte(i)}, 700+i)
		total += int64(len(bodies[i]))
	}
	send := func() {
		var n, sum int64
		b := &pgx.Batch{}
		b.Queue(`SELECT cardinality($1::bytea[]), sum(length(x)) FROM unnest($1::bytea[]) AS x`, bodies).QueryRow(func(r pgx.Row) error {
			return r.Scan(&n, &sum)
		})
		if err := tx.send(ctx, b, false); err != nil {
			t.Fatal(err)
		}
		if n != int64(len(bodies)) || sum != total {
			t.Fatalf("the server received %d bodies of %d bytes, want %d of %d", n, sum, len(bodies), total)
		}
	}
	send() // prepares the statement, makes the buffers
	send()
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	const rounds = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		send()
	}
	runtime.ReadMemStats(&after)
	perSend := int64(after.TotalAlloc-before.TotalAlloc) / rounds
	if perSend > total/4 {
		t.Errorf("a batch of %d bytes of bodies allocated %d bytes per send, want under %d (no write buffer regrown per batch)",
			total, perSend, total/4)
	}
	t.Logf("%d bytes allocated per send of %d bytes of bodies", perSend, total)
}
