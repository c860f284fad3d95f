package stepwise

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// listen follows the store's change notifications (store.ChannelChanges,
// sent by the driver inside the transaction of each change) until ctx
// ends:
//   - steps committed that this process has not published make the local
//     subscribers of that session catch up from the store (the same path a
//     slow subscriber takes);
//   - a run's change of status (finished, cancelled, waiting, queued) makes
//     them re-check the store, so a run stream ends or reports the park
//     wherever the run executed; a queued run wakes the executor;
//   - an empty payload (the listening connection was re-established, and
//     notifications may have been lost) makes every local subscriber
//     re-check the store and wakes the executor.
//
// Stores without a Notifier are reached by this process only: every change
// is published locally.
func (e *Engine) listen(ctx context.Context) {
	n := e.store.Notifier()
	if n == nil {
		return
	}
	changes, err := n.Listen(ctx, store.ChannelChanges)
	if err != nil {
		e.cfg.Logger.Error("stepwise: listen for changes", "err", err)
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case p, ok := <-changes:
				if !ok {
					return
				}
				e.onChange(p)
			}
		}
	}()
}

// onChange applies one change notification.
func (e *Engine) onChange(payload string) {
	c, ok := store.ParseChange(payload)
	switch {
	case !ok:
		// A reconnect (empty payload), or a payload of a newer version:
		// re-check everything.
		e.broker.PokeAll()
		e.wakeLocal()
	case c.RunID == "":
		e.broker.PokeBehind(c.SessionID, c.Seq)
	default:
		e.broker.Poke(c.SessionID)
		if steptype.RunStatus(c.Status) == steptype.RunQueued {
			e.wakeLocal()
		}
	}
}
