package stepwise

import (
	"hash/maphash"
	"sync"
)

// sessionLocks holds the per-session commit locks of lockSession, spread
// over shards by session ID so that commits of different sessions do not
// take a common mutex (the engine's own would serialise every commit of
// every run twice).
type sessionLocks struct {
	shards [brokerShards]struct {
		mu sync.Mutex
		m  map[string]*sessionLock
		_  [40]byte // keeps shards' mutexes on separate cache lines
	}
}

// acquire returns the lock of a session, counted as in use.
func (sl *sessionLocks) acquire(id string) *sessionLock {
	sh := &sl.shards[shardIndex(id)]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[string]*sessionLock{}
	}
	l := sh.m[id]
	if l == nil {
		l = &sessionLock{}
		sh.m[id] = l
	}
	l.refs++
	sh.mu.Unlock()
	return l
}

// release ends an acquire, forgetting the lock when nobody uses it.
func (sl *sessionLocks) release(id string, l *sessionLock) {
	sh := &sl.shards[shardIndex(id)]
	sh.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(sh.m, id)
	}
	sh.mu.Unlock()
}

// shardIndex is the shard of a session ID (the runtime's string hash, seeded
// per process), for the broker and the session locks.
func shardIndex(id string) uint32 {
	return uint32(maphash.String(shardSeed, id) & (brokerShards - 1))
}

// shardSeed seeds shardIndex.
var shardSeed = maphash.MakeSeed()
