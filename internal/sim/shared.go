package sim

import (
	"context"
	"sync"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// shared is the simulation's database: a memory store that announces its
// changes to every engine, as PostgreSQL does with pg_notify. Without it,
// an engine would not hear of another's commits (a memory store is reached
// by one engine, its Notifier nil), and its streams would wait for a step
// another engine committed.
type shared struct {
	store.Store
	mu        sync.Mutex
	listeners map[*listener]struct{}
}

type listener struct {
	ctx context.Context
	ch  chan string
}

func newShared(inner store.Store) *shared {
	return &shared{Store: inner, listeners: map[*listener]struct{}{}}
}

// Notifier returns the store itself: it is its own Notifier.
func (s *shared) Notifier() store.Notifier { return s }

// Notify delivers payload to every listener of ChannelChanges.
func (s *shared) Notify(_ context.Context, channel, payload string) error {
	if channel != store.ChannelChanges {
		return nil
	}
	s.mu.Lock() // held while sending: a listener closes under it
	defer s.mu.Unlock()
	for l := range s.listeners {
		select {
		case l.ch <- payload:
		case <-l.ctx.Done():
		}
	}
	return nil
}

// Listen subscribes to channel until ctx ends.
func (s *shared) Listen(ctx context.Context, channel string) (<-chan string, error) {
	l := &listener{ctx: ctx, ch: make(chan string, 256)}
	if channel != store.ChannelChanges {
		return l.ch, nil
	}
	s.mu.Lock()
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.listeners, l)
		close(l.ch)
		s.mu.Unlock()
	}()
	return l.ch, nil
}

func (s *shared) run(r *steptype.Run) {
	_ = s.Notify(context.Background(), store.ChannelChanges, store.ChangeRun(r.SessionID, r.ID, string(r.Status)))
}

// StepAppend announces the steps it committed.
func (s *shared) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	steps, err := s.Store.StepAppend(ctx, p)
	if err == nil && len(steps) > 0 {
		last := steps[len(steps)-1]
		_ = s.Notify(ctx, store.ChannelChanges, store.ChangeStep(last.SessionID, last.Sequence))
		if r, err := s.Store.RunGet(context.Background(), &store.RunGetParams{ID: last.RunID}); err == nil {
			s.run(r)
		}
	}
	return steps, err
}

// StepResolve announces the step and its run.
func (s *shared) StepResolve(ctx context.Context, p *store.StepResolveParams) (*steptype.Step, error) {
	st, err := s.Store.StepResolve(ctx, p)
	if err == nil {
		_ = s.Notify(ctx, store.ChannelChanges, store.ChangeStep(st.SessionID, st.Sequence))
		if r, err := s.Store.RunGet(context.Background(), &store.RunGetParams{ID: st.RunID}); err == nil {
			s.run(r)
		}
	}
	return st, err
}

// RunCreate announces the run.
func (s *shared) RunCreate(ctx context.Context, p *store.RunCreateParams) (*steptype.Run, error) {
	r, err := s.Store.RunCreate(ctx, p)
	if err == nil {
		s.run(r)
	}
	return r, err
}

// RunUpdate announces the run's status.
func (s *shared) RunUpdate(ctx context.Context, p *store.RunUpdateParams) (*steptype.Run, error) {
	r, err := s.Store.RunUpdate(ctx, p)
	if err == nil {
		s.run(r)
	}
	return r, err
}
