package stepwise

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store/memory"
)

// slowObserver takes perCall for each observation unless its context
// ends first, as an observer whose store writes each fail after a timeout.
type slowObserver struct {
	perCall time.Duration
	mu      sync.Mutex
	done    int
}

func (o *slowObserver) wait(ctx context.Context) {
	select {
	case <-time.After(o.perCall):
	case <-ctx.Done():
	}
	o.mu.Lock()
	o.done++
	o.mu.Unlock()
}

func (o *slowObserver) StepCommitted(ctx context.Context, _ *Run, _ *Step) { o.wait(ctx) }
func (o *slowObserver) RunFinished(ctx context.Context, _ *Run)            { o.wait(ctx) }

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Stopping an observer whose deliveries are slow (a failing store) is
// bounded: after the bound its context is cancelled, what is still queued
// is dropped, and the log says how much. Engine.Close and the stop
// function Observe returns both hold to it.
func TestObserverStopIsBounded(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			e, err := New(Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			obs := &slowObserver{perCall: 50 * time.Millisecond}
			stop := e.Observe(obs)
			const bound = 200 * time.Millisecond
			e.observation(false).SetStopBound(bound)
			const queued = 400 // 20 s of deliveries
			for range queued {
				e.runCommitHooks([]*Step{{ID: "s", RunID: "r"}})
			}
			start := time.Now()
			if how == "stop" {
				stop()
			} else {
				_ = e.Close()
			}
			if took := time.Since(start); took > bound+2*time.Second {
				t.Fatalf("%s took %v with %d observations queued; the bound is %v", how, took, queued, bound)
			}
			obs.mu.Lock()
			delivered := obs.done
			obs.mu.Unlock()
			if delivered >= queued {
				t.Fatalf("all %d observations delivered", delivered)
			}
			if out := logs.String(); !strings.Contains(out, "observer stopped before delivering everything") || !strings.Contains(out, "dropped=") {
				t.Fatalf("nothing logged of what was dropped:\n%s", out)
			}
			_ = e.Close()
		})
	}
}
