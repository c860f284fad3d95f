package memory

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestStepIndexMatchesMap runs random adds, puts, deletes and lookups of
// ids that mostly arrive in increasing order (and sometimes not, or again)
// on a stepIndex and on a map: they always agree (seed logged). The rows
// are bare, so the by-id half is driven (insert, swap, remove); the by-run
// half has TestRunIndexFollowsSteps.
func TestStepIndexMatchesMap(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	ix, want := newStepIndex(), map[string]*stepRow{}
	next := 0
	var ids []string
	id := func() string {
		if len(ids) == 0 || r.IntN(3) > 0 {
			next += 1 + r.IntN(3)
			if r.IntN(10) == 0 {
				next -= 5 // out of order
			}
			s := fmt.Sprintf("%08d", max(next, 0))
			ids = append(ids, s)
			return s
		}
		return ids[r.IntN(len(ids))]
	}
	for i := range 200000 {
		k := id()
		switch r.IntN(6) {
		case 0, 1, 2:
			row := idRow(k)
			added := ix.insert(k, row)
			if _, had := want[k]; had == added {
				t.Fatalf("op %d: add(%s) = %v with the id stored: %v", i, k, added, had)
			}
			if added {
				want[k] = row
			}
		case 3:
			row := idRow(k)
			ix.swap(k, row)
			want[k] = row
		case 4:
			row := want[k]
			if r.IntN(4) == 0 {
				row = idRow(k) // not the stored one: no-op
			}
			ix.remove(k, row)
			if want[k] == row {
				delete(want, k)
			}
		}
		if got := ix.get(k); got != want[k] {
			t.Fatalf("op %d: get(%s) = %p, want %p", i, k, got, want[k])
		}
	}
	n := 0
	ix.each(func(id string, row *stepRow) bool {
		if want[id] != row {
			t.Fatalf("each: %s = %p, want %p", id, row, want[id])
		}
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("each: %d entries, want %d", n, len(want))
	}
	for k, row := range want {
		if got := ix.get(k); got != row {
			t.Fatalf("get(%s) = %p, want %p", k, got, row)
		}
	}
	dead := 0
	for i := range ix.shards {
		dead += ix.shards[i].dead
		for _, r := range ix.shards[i].ordered {
			if r.tomb {
				dead--
			}
		}
	}
	if dead != 0 {
		t.Fatalf("the tombstone counts are off by %d", dead)
	}
}

// idRow is a bare row whose id is id (the index reads ids from rows).
func idRow(id string) *stepRow {
	r := tombstone(id)
	r.tomb = false
	return r
}
