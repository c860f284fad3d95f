package worker

import (
	"sync"

	"github.com/stepwise-run/stepwise/wire"
)

// hub carries the wake-ups of one process: a task queued for an agent
// (pollers), a task finished (the handler waiting for it), and the events a
// worker reports for a task (relayed to the handler executing its step).
// The store stays the source of truth: a woken waiter re-reads it.
type hub struct {
	mu       sync.Mutex
	queued   map[string]map[chan struct{}]struct{} // agent → pollers
	finished map[string]map[chan struct{}]struct{} // task id → waiters
	relays   map[string]chan []*wire.TaskEvent     // task id → its handler
}

func newHub() *hub {
	return &hub{queued: map[string]map[chan struct{}]struct{}{}, finished: map[string]map[chan struct{}]struct{}{},
		relays: map[string]chan []*wire.TaskEvent{}}
}

// watch registers ch under each key of m; the returned func removes it.
func (h *hub) watch(m map[string]map[chan struct{}]struct{}, keys []string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	for _, k := range keys {
		if m[k] == nil {
			m[k] = map[chan struct{}]struct{}{}
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

func (h *hub) wake(m map[string]map[chan struct{}]struct{}, key string) {
	h.mu.Lock()
	for ch := range m[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}

// wakeAll wakes every waiter (the cross-process notifications were
// interrupted: anything may have changed).
func (h *hub) wakeAll() {
	h.mu.Lock()
	for _, m := range []map[string]map[chan struct{}]struct{}{h.queued, h.finished} {
		for _, set := range m {
			for ch := range set {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}
	h.mu.Unlock()
}

func (h *hub) watchQueued(agents []string) (chan struct{}, func()) { return h.watch(h.queued, agents) }
func (h *hub) watchFinished(id string) (chan struct{}, func()) {
	return h.watch(h.finished, []string{id})
}
func (h *hub) taskQueued(agent string) { h.wake(h.queued, agent) }
func (h *hub) taskFinished(id string)  { h.wake(h.finished, id) }

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
