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
	if _, err := n.s.before(ctx, "Notify", false); err != nil {
		return err
	}
	return n.inner.Notify(ctx, channel, payload)
}

// Listen forwards the inner subscription, dropping or delaying each
// delivery on the schedule. Delayed deliveries keep their order.
func (n *notifier) Listen(ctx context.Context, channel string) (<-chan string, error) {
	in, err := n.inner.Listen(ctx, channel)
	if err != nil {
		return nil, err
	}
	out := make(chan string, 64)
	go func() {
		defer close(out)
		for p := range in {
			d := n.s.decide()
			if n.s.enabled.Load() && p != "" {
				if d.draws[0] < n.s.cfg.NotifyLost {
					n.s.count(FaultNotifyLost)
					continue
				}
				if d.draws[1] < n.s.cfg.NotifyDelay && n.s.cfg.MaxNotifyDelay > 0 {
					n.s.count(FaultNotifyDelay)
					t := time.NewTimer(time.Duration(d.draws[2] * float64(n.s.cfg.MaxNotifyDelay)))
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
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
