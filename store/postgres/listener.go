package postgres

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// listener owns the LISTEN connection of a Store and fans notifications
// out to subscriptions. One goroutine, started by the first subscription,
// owns the connection: it applies LISTEN/UNLISTEN for the subscriptions
// that came and went, then waits for a notification; a change of
// subscriptions interrupts the wait (cancelling its context sets a
// deadline on the socket, which leaves the connection usable).
type listener struct {
	cc *pgx.ConnConfig

	mu         sync.Mutex
	subs       map[string]map[*subscription]struct{} // by PostgreSQL channel
	pending    []*listenReq
	cancelWait context.CancelFunc // interrupts the current wait, when waiting
	wake       chan struct{}      // interrupts a reconnect backoff
	started    bool
	closed     bool
	done       chan struct{}
}

type subscription struct {
	name string
	ch   chan string
	// lost: a payload was dropped because ch was full; an empty payload
	// ("re-read everything") is owed as soon as ch has room.
	lost bool
}

// listenReq is a subscription waiting for its LISTEN to be active.
type listenReq struct {
	done chan error
}

func newListener(cc *pgx.ConnConfig) *listener {
	return &listener{
		cc:   cc.Copy(),
		subs: map[string]map[*subscription]struct{}{},
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// subscribe adds a subscription to name and returns once the connection
// listens on it.
func (l *listener) subscribe(ctx context.Context, name string) (<-chan string, error) {
	sub := &subscription{name: name, ch: make(chan string, ListenBuffer)}
	req := &listenReq{done: make(chan error, 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	if l.subs[name] == nil {
		l.subs[name] = map[*subscription]struct{}{}
	}
	l.subs[name][sub] = struct{}{}
	l.pending = append(l.pending, req)
	if !l.started {
		l.started = true
		go l.run()
	}
	l.kickLocked()
	l.mu.Unlock()
	select {
	case err := <-req.done:
		if err != nil {
			l.remove(sub)
			return nil, err
		}
	case <-ctx.Done():
		l.remove(sub)
		return nil, ctx.Err()
	}
	context.AfterFunc(ctx, func() { l.remove(sub) })
	return sub.ch, nil
}

// remove ends a subscription: its channel is closed, and the connection
// stops listening when it was the channel's last one.
func (l *listener) remove(sub *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.subs[sub.name]
	if _, ok := set[sub]; !ok {
		return
	}
	delete(set, sub)
	close(sub.ch)
	if len(set) == 0 {
		delete(l.subs, sub.name)
		l.kickLocked()
	}
}

// kickLocked interrupts the goroutine's wait or backoff.
func (l *listener) kickLocked() {
	if l.cancelWait != nil {
		l.cancelWait()
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// close ends every subscription and waits for the goroutine to close the
// connection.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	started := l.started
	l.kickLocked()
	l.mu.Unlock()
	if started {
		<-l.done
	}
}

// deliver sends a payload to the subscriptions of name without blocking.
// A subscription whose channel is full loses the payload and is owed an
// empty one (see owe).
func (l *listener) deliver(name, payload string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, set := range l.subs {
		if n != name && !all {
			continue
		}
		for sub := range set {
			select {
			case sub.ch <- payload:
			default:
				sub.lost = true
			}
		}
	}
}

// owe delivers the empty payload owed to subscriptions that lost one, as
// far as their channels have room, and reports whether some are still owed.
func (l *listener) owe() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	owed := false
	for _, set := range l.subs {
		for sub := range set {
			if !sub.lost {
				continue
			}
			select {
			case sub.ch <- "":
				sub.lost = false
			default:
				owed = true
			}
		}
	}
	return owed
}

// shutdown closes every subscription and fails the pending ones.
func (l *listener) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.subs {
		for sub := range set {
			close(sub.ch)
		}
	}
	clear(l.subs)
	for _, req := range l.pending {
		req.done <- ErrClosed
	}
	l.pending = nil
}
