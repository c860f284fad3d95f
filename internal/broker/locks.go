package broker

import (
	"hash/maphash"
	"sync"
)

// SessionLocks holds the per-session commit locks of lockSession, spread
// over shards by session ID so that commits of different sessions do not
// take a common mutex (the engine's own would serialise every commit of
// every run twice).
type SessionLocks struct {
	shards [shardCount]struct {
		mu sync.Mutex
		m  map[string]*SessionLock
		_  [40]byte // keeps shards' mutexes on separate cache lines
	}
}

// Acquire returns the lock of a session, counted as in use.
func (sl *SessionLocks) Acquire(id string) *SessionLock {
	sh := &sl.shards[shardIndex(id)]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[string]*SessionLock{}
	}
	l := sh.m[id]
	if l == nil {
		l = &SessionLock{}
		sh.m[id] = l
	}
	l.refs++
	sh.mu.Unlock()
	return l
}

// Release ends an acquire, forgetting the lock when nobody uses it.
func (sl *SessionLocks) Release(id string, l *SessionLock) {
	sh := &sl.shards[shardIndex(id)]
	sh.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(sh.m, id)
	}
	sh.mu.Unlock()
}

// SessionLock is the commit lock of one session.
type SessionLock struct {
	sync.Mutex
	refs int
}

// shardIndex is the shard of a session ID (the runtime's string hash, seeded
// per process), for the broker and the session locks.
func shardIndex(id string) uint32 {
	return uint32(maphash.String(shardSeed, id) & (shardCount - 1))
}

// shardSeed seeds shardIndex.
var shardSeed = maphash.MakeSeed()
