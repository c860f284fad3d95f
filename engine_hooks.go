package stepwise

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// commitHooks holds the OnCommit callbacks of every engine, keyed weakly so
// that hooks need no field in Engine and die with it.
var commitHooks struct {
	n  atomic.Int64 // callbacks registered across engines: 0 skips the lookup
	mu sync.RWMutex
	m  map[weak.Pointer[Engine]][]func(*Step)
}

// OnCommit registers fn to be called with each step this engine commits
// while executing runs (user, llm, tool, agent, input, decision, custom and
// error steps), after the commit is durable and in commit order per session.
//
// fn runs on the executing goroutine, inside the session's commit lock: it
// must return quickly and never block (hand the step to a channel without
// waiting, as recall.Worker does), and it must not modify the step. Steps
// written outside an execution (ingest, edited forks, answers to input
// requests) are not reported; a consumer that needs every step also scans
// the store. Registering is safe at any time, concurrently with runs.
func (e *Engine) OnCommit(fn func(*Step)) {
	if fn == nil {
		return
	}
	wp := weak.Make(e)
	commitHooks.mu.Lock()
	defer commitHooks.mu.Unlock()
	if commitHooks.m == nil {
		commitHooks.m = make(map[weak.Pointer[Engine]][]func(*Step))
	}
	if _, ok := commitHooks.m[wp]; !ok {
		runtime.AddCleanup(e, dropCommitHooks, wp)
	}
	commitHooks.m[wp] = append(commitHooks.m[wp], fn)
	commitHooks.n.Add(1)
}

func dropCommitHooks(wp weak.Pointer[Engine]) {
	commitHooks.mu.Lock()
	defer commitHooks.mu.Unlock()
	commitHooks.n.Add(-int64(len(commitHooks.m[wp])))
	delete(commitHooks.m, wp)
}

// runCommitHooks calls the OnCommit callbacks with committed steps. The
// execution calls it right after a successful commit.
func (e *Engine) runCommitHooks(steps []*Step) {
	if len(steps) == 0 || commitHooks.n.Load() == 0 {
		return
	}
	commitHooks.mu.RLock()
	fns := commitHooks.m[weak.Make(e)]
	commitHooks.mu.RUnlock()
	for _, fn := range fns {
		for _, s := range steps {
			fn(s)
		}
	}
}
