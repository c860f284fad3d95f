package executor

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
//     wherever the run executed; a queued run wakes the service;
//   - an empty payload (the listening connection was re-established, and
//     notifications may have been lost) makes every local subscriber
//     re-check the store and wakes the service.
//
// Stores without a Notifier are reached by this process only: every change
// is published locally.
func (s *Service) listen(ctx context.Context) {
	n := s.cfg.Store.Notifier()
	if n == nil {
		return
	}
	changes, err := n.Listen(ctx, store.ChannelChanges)
	if err != nil {
		s.cfg.Logger.Error("stepwise: listen for changes", "err", err)
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
				s.OnChange(p)
			}
		}
	}()
}

// OnChange applies one change notification.
func (s *Service) OnChange(payload string) {
	c, ok := store.ParseChange(payload)
	switch {
	case !ok:
		// A reconnect (empty payload), or a payload of a newer version:
		// re-check everything.
		s.cfg.Broker.PokeAll()
		s.Wake()
	case c.RunID == "":
		s.cfg.Broker.PokeBehind(c.SessionID, c.Seq)
	default:
		s.cfg.Broker.Poke(c.SessionID)
		if steptype.RunStatus(c.Status) == steptype.RunQueued {
			s.Wake()
		}
	}
}
