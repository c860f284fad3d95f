package executor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// A failed load keeps the run leased for a doubling backoff, at most the
// lease length.
func TestLoadBackoff(t *testing.T) {
	lease := 2 * time.Second
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: 1600 * time.Millisecond, 6: lease, 40: lease} {
		if got := loadBackoff(attempt, lease); got != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
}

// An owner is alive from its first registration to its last
// unregistration.
func TestOwnerAlive(t *testing.T) {
	o := "owner-" + t.Name()
	RegisterOwner(o)
	RegisterOwner(o)
	UnregisterOwner(o)
	if !OwnerAlive(o) {
		t.Fatal("owner registered twice and unregistered once is not alive")
	}
	UnregisterOwner(o)
	if OwnerAlive(o) {
		t.Fatal("owner unregistered as often as registered is alive")
	}
}

// A notification of a queued run wakes the service and makes the session's
// subscribers catch up from the store.
func TestOnChangeWakesAndPokes(t *testing.T) {
	b := broker.New()
	s := New(Config{Broker: b, Logger: slog.Default(), Now: time.Now})
	sub, _, _ := b.Subscribe("s", "", steptype.Position{}, nil)
	s.OnChange(store.ChangeRun("s", "r", string(steptype.RunQueued)))
	if !sub.Lagged() {
		t.Error("the session's subscriber was not sent to the store")
	}
	select {
	case <-s.wake:
	default:
		t.Error("a queued run did not wake the service")
	}
}

// Stop before Start refuses a later Start, and Stop waits for nothing
// when nothing runs.
func TestStopBeforeStart(t *testing.T) {
	stopped := 0
	s := New(Config{Broker: broker.New(), Logger: slog.Default(), Now: time.Now, StopExecutions: func() { stopped++ }})
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if stopped != 1 {
		t.Fatalf("StopExecutions called %d times, want 1", stopped)
	}
	if err := s.Start(context.Background()); err != ErrStopping {
		t.Fatalf("Start after Stop: %v, want ErrStopping", err)
	}
	select {
	case <-s.Stopped():
	default:
		t.Fatal("Stopped is not closed after Stop")
	}
}
