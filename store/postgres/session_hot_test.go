package postgres_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// The update every append makes to its session (last_seq, totals,
// updated_at) is HOT while the session's activity stays in the same
// second: no index of sessions covers a column it changes, so it writes no
// index entry (migration 00085). Before, sessions_activity indexed
// updated_at and no such update was HOT.
func TestSessionAppendUpdateIsHOT(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	for _, id := range []string{"s1", "s2"} {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	conn := schemaConn(t, schema)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	base := (time.Now().Unix()+10)*1e9 + 1 // a second of their own
	hot := func() int64 {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_hot_updated('sessions'::regclass)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Into the new second: activity changes, the update may not be HOT.
	if _, err := tx.Exec(ctx, postgres.SessionTotalsManySQL, []string{"s1", "s2"}, []int64{1, 1}, []int64{0, 0},
		[]int64{0, 0}, []float64{0, 0}, []int64{base, base}); err != nil {
		t.Fatal(err)
	}
	before := hot()
	// Within it, as the following appends of a busy session are.
	for i := int64(2); i <= 4; i++ {
		if _, err := tx.Exec(ctx, postgres.SessionTotalsSQL, i, 10*i, 20*i, 0.5, base+i*1000, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, postgres.SessionTotalsManySQL, []string{"s1", "s2"}, []int64{5, 2}, []int64{50, 1},
		[]int64{100, 1}, []float64{1, 0.1}, []int64{base + 9e8, base + 5}); err != nil {
		t.Fatal(err)
	}
	if got := hot() - before; got != 5 {
		t.Fatalf("%d of the 5 updates within one second were HOT, want all", got)
	}
}

// SessionList keeps its order, updated_at then id, both descending, and
// its pages, across sessions active in the same second, the same
// nanosecond and different seconds (the index orders by the second only).
func TestSessionListOrderWithinASecond(t *testing.T) {
	schema := freshSchema(t)
	st := open(t, postgres.Config{Schema: schema})
	ctx := t.Context()
	sec := time.Now().Unix() * 1e9
	at := map[string]int64{
		"a": sec + 5, "b": sec + 999_999_999, "c": sec + 5, "d": sec - 1, "e": sec + 1e9,
		"f": sec + 500, "g": sec - 1e9 + 3, "h": sec + 999_999_999, "i": 0, "j": sec + 1e9 - 1,
	}
	conn := rawConn(t)
	for id, n := range at {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "sessions"}.Sanitize()+` SET updated_at = $1 WHERE id = $2`, n, id); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for id := range at {
		want = append(want, id)
	}
	slices.SortFunc(want, func(x, y string) int {
		if at[x] != at[y] {
			return -cmp.Compare(at[x], at[y])
		}
		return -strings.Compare(x, y)
	})
	for _, limit := range []int{1, 2, 3, 10} {
		var got []string
		p := &store.SessionListParams{Limit: limit}
		for {
			page, err := st.SessionList(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Sessions {
				got = append(got, s.ID)
				if n := s.UpdatedAt.UnixNano(); at[s.ID] != 0 && n != at[s.ID] {
					t.Errorf("%s: updated_at %d, want %d", s.ID, n, at[s.ID])
				}
			}
			if page.Next == "" {
				break
			}
			p.Cursor = page.Next
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: %v, want %v", limit, got, want)
		}
	}
}
