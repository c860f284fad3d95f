package memory

import (
	"iter"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// stepIndex maps step ids to rows, in shards like index. A shard keeps
// the ids that arrive in increasing order — the engine's ids are UUIDv7,
// ordered by time, so nearly all of them — in a sorted slice, and the
// others in a map. A hash index of every stored step makes each append a
// cache miss at a random place of a table as large as the store (and a
// rehash when a table fills); appending to a sorted slice touches only its
// end, and a new id is known new by comparing it with the last one and
// looking in the (small) map. Lookups of older ids search the slice.
//
// An entry of the slice is its row alone, whose id is read from the row's
// bytes: one pointer per stored step for the collector to follow (an
// entry was an id string and a row, two), in 8 bytes instead of 24.
type stepIndex struct {
	shards [indexShards]struct {
		mu sync.Mutex
		// ordered is sorted by id; a deleted entry is a tombstone (see
		// tombstone) that keeps its place, filled again if the id is stored
		// again; dead counts them, and ordered is compacted when they are
		// half.
		ordered []*stepRow
		dead    int
		other   map[string]*stepRow
		_       [32]byte // keeps shards' mutexes on separate cache lines
	}
	runs runIndex // the same rows by run (runsteps.go)
}

// tombstone is the entry of a deleted id: a row of its own that holds
// only (a copy of) the id, so that the deleted step's bytes are not kept.
func tombstone(id string) *stepRow {
	b := putString(make([]byte, 0, sizeOf(len(id))+2), id)
	b = append(b, 0, 0) // no session id, no run id
	return &stepRow{b: unsafe.SliceData(b), n: len(b), tomb: true}
}

func newStepIndex() *stepIndex {
	ix := &stepIndex{}
	for i := range ix.shards {
		ix.shards[i].other = map[string]*stepRow{}
		ix.runs[i].m = map[string]*runRows{}
	}
	return ix
}

// find returns the position of id in ordered (or where it would go) and
// whether it is there.
func find(ordered []*stepRow, id string) (int, bool) {
	if n := len(ordered); n == 0 || id > ordered[n-1].id() {
		return n, false // the common case: a new id, after every other
	}
	return slices.BinarySearchFunc(ordered, id, func(r *stepRow, id string) int { return strings.Compare(r.id(), id) })
}

// get returns the row of id, or nil.
func (ix *stepIndex) get(id string) *stepRow {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	var row *stepRow
	if len(sh.other) != 0 {
		row = sh.other[id]
	}
	if row == nil {
		if i, ok := find(sh.ordered, id); ok && !sh.ordered[i].tomb {
			row = sh.ordered[i]
		}
	}
	sh.mu.Unlock()
	return row
}

// put sets the row of id, replacing the one there. Here and in every
// method, id is the row's own (row.id()).
func (ix *stepIndex) put(id string, row *stepRow) {
	old := ix.swap(id, row)
	if old == row {
		return
	}
	if old != nil {
		ix.runs.untrack(old)
	}
	ix.runs.track(row)
}

// swap sets the row of id and returns the one it replaced, or nil.
func (ix *stepIndex) swap(id string, row *stepRow) (old *stepRow) {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.other[id]; ok {
		sh.other[id] = row
		return old
	}
	i, ok := find(sh.ordered, id)
	switch {
	case ok:
		old = sh.ordered[i]
		if old.tomb {
			old = nil
			sh.dead--
		}
		sh.ordered[i] = row
	case i == len(sh.ordered):
		sh.ordered = appendDoubling(sh.ordered, row)
	default:
		sh.other[id] = row
	}
	return old
}

// add sets the row of id unless id is present, and reports whether it
// did.
func (ix *stepIndex) add(id string, row *stepRow) bool {
	if !ix.insert(id, row) {
		return false
	}
	ix.runs.track(row)
	return true
}

// insert is add without the by-run index.
func (ix *stepIndex) insert(id string, row *stepRow) bool {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.other[id]; ok {
		return false
	}
	i, ok := find(sh.ordered, id)
	switch {
	case ok && !sh.ordered[i].tomb:
		return false
	case ok:
		sh.ordered[i] = row
		sh.dead--
	case i == len(sh.ordered):
		sh.ordered = appendDoubling(sh.ordered, row)
	default:
		sh.other[id] = row
	}
	return true
}

// del removes id if its row is row.
func (ix *stepIndex) del(id string, row *stepRow) {
	if ix.remove(id, row) {
		ix.runs.untrack(row)
	}
}

// remove is del without the by-run index; it reports whether it removed.
func (ix *stepIndex) remove(id string, row *stepRow) bool {
	if row == nil {
		return false
	}
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r, ok := sh.other[id]; ok && r == row {
		delete(sh.other, id)
		return true
	}
	i, ok := find(sh.ordered, id)
	if !ok || sh.ordered[i] != row {
		return false
	}
	sh.ordered[i] = tombstone(id)
	if sh.dead++; sh.dead > 32 && sh.dead > len(sh.ordered)/2 {
		sh.ordered = slices.DeleteFunc(sh.ordered, func(r *stepRow) bool { return r.tomb })
		sh.dead = 0
	}
	return true
}

// each calls f for every entry until f returns false. Only under the
// exclusive store lock.
func (ix *stepIndex) each(f func(id string, row *stepRow) bool) {
	for i := range ix.shards {
		sh := &ix.shards[i]
		for _, r := range sh.ordered {
			if !r.tomb && !f(r.id(), r) {
				return
			}
		}
		for id, row := range sh.other {
			if !f(id, row) {
				return
			}
		}
	}
}

// all ranges over every entry. Only under the exclusive store lock.
func (ix *stepIndex) all() iter.Seq2[string, *stepRow] { return ix.each }

// appendDoubling is append that doubles a full slice's capacity: append
// grows a large slice by a quarter, so an index of n entries would have
// allocated and copied about 5n of them; doubling makes it about 2n.
func appendDoubling[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 8))
	}
	return append(s, v)
}
