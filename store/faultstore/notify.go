package faultstore

import (
	"context"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// Notifier returns the inner store's Notifier, whose deliveries are lost
// or delayed on the schedule, or nil when the inner store has none.
func (s *Store) Notifier() store.Notifier {
	n := s.Store.Notifier()
	if n == nil {
		return nil
	}
	return &notifier{inner: n, s: s}
}

type notifier struct {
	inner store.Notifier
	s     *Store
}

// Notify forwards to the inner Notifier (a send is a write of its own: it
// may fail before it is sent).
func (n *notifier) Notify(ctx context.Context, channel, payload string) error {
	if _, err := n.s.before(ctx, "Notify", channel+" "+payload, false); err != nil {
		return err
	}
	return n.inner.Notify(ctx, channel, payload)
}

// Listen forwards the inner subscription, losing or delaying deliveries on
// the schedule. A lost notification is lost as the Notifier contract
// allows, in a reconnect: an empty payload (re-read everything) takes its
// place, up to MaxNotifyDelay late. Deliveries keep their order.
func (n *notifier) Listen(ctx context.Context, channel string) (<-chan string, error) {
	in, err := n.inner.Listen(ctx, channel)
	if err != nil {
		return nil, err
	}
	out := make(chan string, 64)
	go func() {
		defer close(out)
		for p := range in {
			d := n.s.decide("Listen "+channel, p)
			if n.s.down.Load() {
				continue // a process that is gone hears nothing
			}
			if n.s.enabled.Load() && p != "" {
				if d.draws[0] < n.s.cfg.NotifyLost {
					// Lost as the contract allows: in a reconnect, which is
					// then reported with an empty payload (re-read
					// everything), here after up to MaxNotifyDelay.
					n.s.count(FaultNotifyLost)
					if !sleep(ctx, time.Duration(d.draws[2]*float64(n.s.cfg.MaxNotifyDelay))) {
						return
					}
					p = ""
				}
				if p != "" && d.draws[1] < n.s.cfg.NotifyDelay && n.s.cfg.MaxNotifyDelay > 0 {
					n.s.count(FaultNotifyDelay)
					if !sleep(ctx, time.Duration(d.draws[2]*float64(n.s.cfg.MaxNotifyDelay))) {
						return
					}
				}
			}
			select {
			case out <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
