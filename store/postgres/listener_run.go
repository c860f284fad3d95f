package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnect backoff bounds.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// oweRetry is how soon an empty payload owed to a full channel is
	// tried again.
	oweRetry = 50 * time.Millisecond
)

// run is the goroutine that owns the connection.
func (l *listener) run() {
	defer close(l.done)
	defer l.shutdown()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn.Close(ctx)
		}
	}()
	active := map[string]bool{} // channels the connection listens on
	backoff, everConnected, lost := minBackoff, false, false
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		pending, want := l.pending, l.channelsLocked()
		l.pending = nil
		l.mu.Unlock()

		if conn == nil && len(want) == 0 && len(pending) == 0 {
			l.sleep(time.Hour) // nothing to listen for: connect when asked
			continue
		}
		if conn == nil {
			var err error
			if conn, err = l.connect(); err != nil {
				answer(pending, fmt.Errorf("listen: %w", mapErr(err)))
				l.sleep(backoff)
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			active = map[string]bool{}
			backoff = minBackoff
			lost = everConnected
			everConnected = true
		}
		if err := l.sync(conn, want, active); err != nil {
			if conn.IsClosed() {
				// Broken connection: reconnect, then answer.
				conn = nil
				l.requeue(pending)
				continue
			}
			answer(pending, fmt.Errorf("listen: %w", mapErr(err)))
			l.sleep(backoff) // the failed subscriptions are being removed
			continue
		}
		answer(pending, nil)
		if lost {
			// Listening again: tell every subscription that notifications
			// may have been lost while the connection was down.
			l.deliver("", "", true)
			lost = false
		}

		waitCtx, cancel := context.WithCancel(context.Background())
		if l.owe() {
			// A reader is behind: come back soon to pay what it is owed.
			waitCtx, cancel = context.WithTimeout(context.Background(), oweRetry)
		}
		l.mu.Lock()
		if l.closed || len(l.pending) > 0 || !sameKeys(active, l.subs) {
			l.mu.Unlock()
			cancel()
			continue
		}
		l.cancelWait = cancel
		l.mu.Unlock()
		n, err := conn.WaitForNotification(waitCtx)
		l.mu.Lock()
		l.cancelWait = nil
		l.mu.Unlock()
		woken := waitCtx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.deliver(n.Channel, n.Payload, false)
		case woken && !conn.IsClosed():
			// Interrupted for a change of subscriptions.
		default:
			conn.Close(context.Background())
			conn = nil
		}
	}
}

func (l *listener) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cc.ConnectTimeout+time.Second)
	defer cancel()
	return pgx.ConnectConfig(ctx, l.cc)
}

// sync makes the connection listen on exactly the channels in want.
func (l *listener) sync(conn *pgx.Conn, want, active map[string]bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name := range want {
		if !active[name] {
			if _, err := conn.Exec(ctx, `LISTEN `+quoteIdent(name)); err != nil {
				return err
			}
			active[name] = true
		}
	}
	for name := range active {
		if !want[name] {
			if _, err := conn.Exec(ctx, `UNLISTEN `+quoteIdent(name)); err != nil {
				return err
			}
			delete(active, name)
		}
	}
	return nil
}

func (l *listener) channelsLocked() map[string]bool {
	want := make(map[string]bool, len(l.subs))
	for name := range l.subs {
		want[name] = true
	}
	return want
}

// requeue puts requests back in front of the pending ones.
func (l *listener) requeue(reqs []*listenReq) {
	l.mu.Lock()
	l.pending = append(reqs, l.pending...)
	l.mu.Unlock()
}

// sleep waits d, or less when kicked.
func (l *listener) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.wake:
	}
}

func answer(reqs []*listenReq, err error) {
	for _, r := range reqs {
		r.done <- err
	}
}

func sameKeys(a map[string]bool, b map[string]map[*subscription]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range b {
		if !a[k] {
			return false
		}
	}
	return true
}
