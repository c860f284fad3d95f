package vecindex

import (
	"runtime"
	"sync"
	"weak"
)

// Registry attaches a value to each *K without a field in K: the vector
// state of a driver's Store lives here, so adding vectors to a driver needs
// no change to its struct. Entries are dropped when their key is garbage
// collected. A value must not reference its key, or it is never collected.
type Registry[K, V any] struct {
	mu sync.Mutex
	m  map[weak.Pointer[K]]V
}

// Get returns the value of k, creating it with mk on first use.
func (r *Registry[K, V]) Get(k *K, mk func() V) V {
	wp := weak.Make(k)
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.m[wp]; ok {
		return v
	}
	if r.m == nil {
		r.m = make(map[weak.Pointer[K]]V)
	}
	v := mk()
	r.m[wp] = v
	runtime.AddCleanup(k, r.drop, wp)
	return v
}

func (r *Registry[K, V]) drop(wp weak.Pointer[K]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, wp)
}

// Len reports how many keys have a value (for tests).
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
