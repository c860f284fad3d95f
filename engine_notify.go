package stepwise

import (
	"context"
	"strings"
)

// notifier is implemented by stores that can wake other processes sharing
// the database (PostgreSQL LISTEN/NOTIFY). The store stays the source of
// truth: a notification only says "look again".
type notifier interface {
	SupportsListenNotify() bool
	Notify(ctx context.Context, channel, payload string) error
	Listen(ctx context.Context, channel string) (<-chan string, error)
}

// Notification channels.
const (
	chanEvents = "stepwise_events" // payload "OWNER SESSION": a step was committed
	chanRuns   = "stepwise_runs"   // payload "OWNER RUN": a run became runnable
)

func (e *Engine) notifier() notifier {
	n, ok := e.store.(notifier)
	if !ok || !n.SupportsListenNotify() {
		return nil
	}
	return n
}

// notifyCommit tells other instances that a session has new steps.
func (e *Engine) notifyCommit(sessionID string) {
	if n := e.notifier(); n != nil {
		_ = n.Notify(context.Background(), chanEvents, e.cfg.Owner+" "+sessionID)
	}
}

// notifyRunnable tells other instances' executors that a run can be claimed.
func (e *Engine) notifyRunnable(runID string) {
	if n := e.notifier(); n != nil {
		_ = n.Notify(context.Background(), chanRuns, e.cfg.Owner+" "+runID)
	}
}

// listen follows other instances' notifications until ctx ends: committed
// steps make local subscribers of that session catch up from the store (the
// same path a slow subscriber takes); runnable runs wake the executor.
func (e *Engine) listen(ctx context.Context) {
	n := e.notifier()
	if n == nil {
		return
	}
	events, err := n.Listen(ctx, chanEvents)
	if err != nil {
		e.cfg.Logger.Error("stepwise: listen for events", "err", err)
		return
	}
	runs, err := n.Listen(ctx, chanRuns)
	if err != nil {
		e.cfg.Logger.Error("stepwise: listen for runs", "err", err)
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case p, ok := <-events:
				if !ok {
					return
				}
				if owner, sid, _ := strings.Cut(p, " "); owner != e.cfg.Owner {
					e.broker.poke(sid)
				}
			case p, ok := <-runs:
				if !ok {
					return
				}
				if owner, _, _ := strings.Cut(p, " "); owner != e.cfg.Owner {
					e.wakeLocal()
				}
			}
		}
	}()
}
