package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestLazyFinishIsDurableOnReturn: a finish with Visible commits with
// synchronous_commit off, but TaskFinish returns only once the WAL holds
// it flushed — here by a barrier of its own, as no other commit follows.
func TestLazyFinishIsDurableOnReturn(t *testing.T) {
	f := newGroupFixture(t)
	st, ctx, conn := f.st, t.Context(), rawConn(t)
	f.session("s1")
	f.run("r1", "s1", steptype.RunRunning)
	for i := range 20 {
		id := "t" + string(rune('a'+i))
		task := &store.Task{ID: id, Key: "k" + id, Kind: "tool", Name: "x", Agent: "a", SessionID: "s1", RunID: "r1"}
		c, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: task, Owner: "w", Lease: time.Minute, Lazy: true})
		if err != nil {
			t.Fatal(err)
		}
		var written string
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: id, Token: c.Token, State: store.TaskCompleted, Result: json.RawMessage(`1`),
			Visible: func(*store.Task) {
				// The WAL written so far includes the finish's commit.
				if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&written); err != nil {
					t.Error(err)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		var flushed bool
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn`, written).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		if !flushed {
			t.Fatalf("task %s: TaskFinish returned before the WAL up to %s was flushed", id, written)
		}
	}
}
