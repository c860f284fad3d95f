package worker

import (
	"slices"
	"sync"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// hub carries the wake-ups of one process: a task queued for an agent
// (pollers), a task finished (the handler waiting for it), and the events a
// worker reports for a task (relayed to the handler executing its step).
// The store stays the source of truth: a woken poller re-reads it, and so
// does a waiting handler, unless the request that finished its task in this
// process handed it the finished task (as the store returned it).
type hub struct {
	mu       sync.Mutex
	queued   map[string]map[chan struct{}]struct{}    // agent → pollers
	finished map[string]map[chan *store.Task]struct{} // task id → waiters
	relays   map[string]chan []*wire.TaskEvent        // task id → its handler
	waiters  map[string][]*waiter                     // agent → polls waiting, oldest first
}

// waiter is a poll waiting for a task of its agents. A handler about to
// create a task may take it and create the task claimed by its worker,
// handing it over without the poll's own claim.
type waiter struct {
	worker string
	agents []string
	names  []string
	ch     chan *store.Task // the task handed over, or nil: claim as usual
	taken  bool
}

func newHub() *hub {
	return &hub{queued: map[string]map[chan struct{}]struct{}{}, finished: map[string]map[chan *store.Task]struct{}{},
		relays: map[string]chan []*wire.TaskEvent{}, waiters: map[string][]*waiter{}}
}

// wait registers a waiting poll of worker for tasks of agents (and names,
// when set).
func (h *hub) wait(worker string, agents, names []string) *waiter {
	w := &waiter{worker: worker, agents: agents, names: names, ch: make(chan *store.Task, 1)}
	h.mu.Lock()
	for _, a := range agents {
		h.waiters[a] = append(h.waiters[a], w)
	}
	h.mu.Unlock()
	return w
}

func (h *hub) dropWaiter(w *waiter) {
	for _, a := range w.agents {
		ws := slices.DeleteFunc(h.waiters[a], func(x *waiter) bool { return x == w })
		if len(ws) == 0 {
			delete(h.waiters, a)
		} else {
			h.waiters[a] = ws
		}
	}
}

// unwait removes w; false means a handler took it, and will send on
// w.ch.
func (h *hub) unwait(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.taken {
		return false
	}
	h.dropWaiter(w)
	return true
}

// take removes and returns the oldest poll waiting for a task of agent
// and name, or nil. Its taker must send on its ch exactly once.
func (h *hub) take(agent, name string) *waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiters[agent] {
		if len(w.names) == 0 || slices.Contains(w.names, name) {
			w.taken = true
			h.dropWaiter(w)
			return w
		}
	}
	return nil
}

// watch registers ch under each key of m; the returned func removes it.
func watch[T any](h *hub, m map[string]map[chan T]struct{}, keys []string) (chan T, func()) {
	ch := make(chan T, 1)
	h.mu.Lock()
	for _, k := range keys {
		if m[k] == nil {
			m[k] = map[chan T]struct{}{}
		}
		m[k][ch] = struct{}{}
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		for _, k := range keys {
			delete(m[k], ch)
			if len(m[k]) == 0 {
				delete(m, k)
			}
		}
		h.mu.Unlock()
	}
}

// wake sends v to the waiters of key; a waiter already woken keeps what
// it was sent first.
func wake[T any](h *hub, m map[string]map[chan T]struct{}, key string, v T) {
	h.mu.Lock()
	for ch := range m[key] {
		select {
		case ch <- v:
		default:
		}
	}
	h.mu.Unlock()
}

// wakeAll wakes every waiter (the cross-process notifications were
// interrupted: anything may have changed).
func (h *hub) wakeAll() {
	h.mu.Lock()
	for _, set := range h.queued {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	for _, set := range h.finished {
		for ch := range set {
			select {
			case ch <- nil: // re-read
			default:
			}
		}
	}
	h.mu.Unlock()
}

func (h *hub) watchQueued(agents []string) (chan struct{}, func()) {
	return watch(h, h.queued, agents)
}

// watchFinished returns a channel that receives the finished task id (nil
// when the waker only knows that it changed: read it again).
func (h *hub) watchFinished(id string) (chan *store.Task, func()) {
	return watch(h, h.finished, []string{id})
}
func (h *hub) taskQueued(agent string) { wake(h, h.queued, agent, struct{}{}) }

// taskFinished wakes the waiters of task id with t, the finished task, or
// nil (read it).
func (h *hub) taskFinished(id string, t *store.Task) { wake(h, h.finished, id, t) }

// waited reports whether a handler in this process waits for task id.
func (h *hub) waited(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.finished[id]) > 0
}

// relay registers the handler's channel of task id's events.
func (h *hub) relay(id string) (chan []*wire.TaskEvent, func()) {
	ch := make(chan []*wire.TaskEvent, 64)
	h.mu.Lock()
	h.relays[id] = ch
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if h.relays[id] == ch {
			delete(h.relays, id)
		}
		h.mu.Unlock()
	}
}

// send hands events to the handler of task id, if it executes in this
// process; it reports whether they were taken (a full relay drops them:
// events are live, never the result).
func (h *hub) send(id string, evs []*wire.TaskEvent) bool {
	h.mu.Lock()
	ch := h.relays[id]
	h.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- evs:
		return true
	default:
		return false
	}
}
