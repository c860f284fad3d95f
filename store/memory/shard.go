package memory

import (
	"hash/maphash"
	"iter"
	"slices"
	"strings"
	"sync"
)

// indexShards is the number of shards of an index (a power of two).
const indexShards = 32

// index maps ids to values in shards, each under its own mutex, so that
// writers holding different session locks (see lockSessions) can insert
// concurrently. Holders of the exclusive store lock may use each without
// shard locks: every writer holds at least the shared store lock.
type index[V comparable] struct {
	shards [indexShards]struct {
		mu sync.Mutex
		m  map[string]V
		_  [40]byte // keeps shards' mutexes on separate cache lines
	}
}

func newIndex[V comparable]() *index[V] {
	ix := &index[V]{}
	for i := range ix.shards {
		ix.shards[i].m = map[string]V{}
	}
	return ix
}

// shardSeed seeds shardOf: a shard is chosen anew in every process.
var shardSeed = maphash.MakeSeed()

// shardOf is the shard of an id: the runtime's string hash, several times
// faster than a byte loop on a 36-character id (an append looks ids up
// about eight times).
func shardOf(id string) int {
	return int(maphash.String(shardSeed, id) & (indexShards - 1))
}

// get returns the value of id, or the zero value.
func (ix *index[V]) get(id string) V {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	v := sh.m[id]
	sh.mu.Unlock()
	return v
}

// put sets the value of id.
func (ix *index[V]) put(id string, v V) {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	sh.m[id] = v
	sh.mu.Unlock()
}

// add sets the value of id unless id is present, and reports whether it
// did.
func (ix *index[V]) add(id string, v V) bool {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	_, taken := sh.m[id]
	if !taken {
		sh.m[id] = v
	}
	sh.mu.Unlock()
	return !taken
}

// del removes id if its value is v.
func (ix *index[V]) del(id string, v V) {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	if sh.m[id] == v {
		delete(sh.m, id)
	}
	sh.mu.Unlock()
}

// each calls f for every entry until f returns false. Only under the
// exclusive store lock.
func (ix *index[V]) each(f func(id string, v V) bool) {
	for i := range ix.shards {
		for id, v := range ix.shards[i].m {
			if !f(id, v) {
				return
			}
		}
	}
}

// all ranges over every entry. Only under the exclusive store lock.
func (ix *index[V]) all() iter.Seq2[string, V] { return ix.each }

// lockSessions locks the rows of the given sessions, in id order so that
// two writers never wait on each other in a cycle, and returns them (sorted,
// without duplicates) for unlockSessions. The caller holds the shared store
// lock.
func lockSessions(rows []*sessionRow) []*sessionRow {
	if len(rows) > 1 {
		slices.SortFunc(rows, func(a, b *sessionRow) int { return strings.Compare(a.id, b.id) })
		rows = slices.Compact(rows)
	}
	for _, sr := range rows {
		sr.mu.Lock()
	}
	return rows
}

func unlockSessions(rows []*sessionRow) {
	for _, sr := range rows {
		sr.mu.Unlock()
	}
}
