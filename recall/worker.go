package recall

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise"
)

// ErrWorkerNotRunning is returned by Worker.Flush when the worker is not
// started, or stopped.
var ErrWorkerNotRunning = errors.New("stepwise: recall: embedding worker is not running")

// Worker computes embeddings in the background after steps commit. Attach
// it to an engine (or call Notify yourself) and Start it:
//
//	w, _ := recall.NewWorker(recall.WorkerConfig{Store: st, Embedder: recall.DefaultEmbedder()})
//	w.Attach(engine)
//	w.Start(ctx)
//	defer w.Stop(ctx)
//
// Committed steps are queued (never blocking the run), embedded in
// batches and stored with the embedder's name. Steps the queue could not
// take, steps committed by other processes or outside an execution, and
// batches whose embedding failed are picked up by sweeps of the store:
// one when the worker starts, then every SweepInterval, and at the next
// Flush after a loss. So a crash or a failing embedding service delays
// embeddings, never loses them.
type Worker struct {
	p     *pipeline
	queue chan item
	dirty atomic.Bool // a step was dropped or a batch failed: sweep

	mu      sync.Mutex
	running atomic.Bool
	cancel  context.CancelFunc
	stopped chan struct{}
}

// item is a step, or a Flush barrier.
type item struct {
	step    *stepwise.Step
	barrier chan struct{}
}

// NewWorker returns a worker; it does nothing until Start.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	p, err := newPipeline(cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{p: p, queue: make(chan item, p.cfg.QueueSize), stopped: make(chan struct{})}
	close(w.stopped)
	return w, nil
}

// Attach makes the engine hand every step it commits to Notify.
func (w *Worker) Attach(e *stepwise.Engine) { e.OnCommit(w.Notify) }

// Notify queues a committed step for embedding without blocking. Steps of
// kinds the configuration never embeds are ignored at once. It is safe to
// call from any goroutine, before Start and after Stop (the step is then
// left to the next start's sweep).
func (w *Worker) Notify(s *stepwise.Step) {
	if s == nil || !w.p.maybe(s) {
		return
	}
	if !w.running.Load() {
		w.dirty.Store(true)
		return
	}
	select {
	case w.queue <- item{step: s}:
	default:
		w.dirty.Store(true)
	}
}

// Start starts the worker's goroutine, which sweeps the store once, then
// embeds queued steps until Stop or until ctx is done.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running.Load() {
		return errors.New("stepwise: recall: embedding worker already started")
	}
	ctx, w.cancel = context.WithCancel(ctx)
	w.stopped = make(chan struct{})
	w.running.Store(true)
	go w.loop(ctx, w.stopped)
	return nil
}

// Stop stops the worker and waits for its goroutine, or for ctx. Steps
// still queued are left to the next start's sweep.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if w.cancel != nil {
		w.cancel()
	}
	stopped := w.stopped
	w.mu.Unlock()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stopped is closed when the worker's goroutine has exited (and before
// the first Start).
func (w *Worker) Stopped() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// Flush waits until every step notified before the call is embedded (or
// its failure logged), sweeping the store first if a step was lost. Tests
// and shutdown paths use it; a running system needs no flush.
func (w *Worker) Flush(ctx context.Context) error {
	stopped := w.Stopped()
	if !w.running.Load() {
		return ErrWorkerNotRunning
	}
	b := make(chan struct{})
	select {
	case w.queue <- item{barrier: b}:
	case <-stopped:
		return ErrWorkerNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-b:
		return nil
	case <-stopped:
		return ErrWorkerNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Worker) loop(ctx context.Context, stopped chan struct{}) {
	defer close(stopped)
	defer w.running.Store(false)
	w.dirty.Store(true)
	w.sweepIfDirty(ctx)
	var tick <-chan time.Time
	if iv := w.p.cfg.SweepInterval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	batch := make([]*stepwise.Step, 0, w.p.cfg.BatchSize)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			w.dirty.Store(true)
			w.sweepIfDirty(ctx)
		case it := <-w.queue:
			batch = batch[:0]
			var barriers []chan struct{}
			for {
				if it.barrier != nil {
					barriers = append(barriers, it.barrier)
				} else {
					batch = append(batch, it.step)
				}
				if len(batch) == cap(batch) {
					break
				}
				select {
				case it = <-w.queue:
					continue
				default:
				}
				break
			}
			w.process(ctx, batch)
			if len(barriers) > 0 {
				w.sweepIfDirty(ctx)
			}
			for _, b := range barriers {
				close(b)
			}
		}
	}
}

// process embeds a batch of notified steps.
func (w *Worker) process(ctx context.Context, steps []*stepwise.Step) {
	if len(steps) == 0 {
		return
	}
	if err := w.p.embed(ctx, steps, &BackfillStats{}); err != nil && ctx.Err() == nil {
		w.dirty.Store(true)
		w.p.cfg.Logger.Warn("stepwise: recall: embedding steps failed; a sweep will retry", "steps", len(steps), "err", err)
	}
}

// sweepIfDirty embeds what is missing in the store, when something may be.
func (w *Worker) sweepIfDirty(ctx context.Context) {
	if !w.dirty.Swap(false) {
		return
	}
	if err := w.p.sweep(ctx, &BackfillStats{}); err != nil && ctx.Err() == nil {
		w.dirty.Store(true)
		w.p.cfg.Logger.Warn("stepwise: recall: embedding sweep failed; will retry", "err", err)
	}
}
