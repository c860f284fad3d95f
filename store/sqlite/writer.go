package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// maxBatch bounds how many write requests one group commit carries.
const maxBatch = 256

// writeReq is one write call waiting for the writer goroutine.
type writeReq struct {
	ctx  context.Context
	fn   func(*wtx) (any, error)
	done chan writeRes // buffered: the writer never blocks on a reply
}

type writeRes struct {
	v   any
	err error
}

// writer owns the single writer connection. Every write is a request on
// reqs; the writer goroutine drains all pending requests (up to maxBatch),
// runs them in ONE transaction with a SAVEPOINT each, so a failing request
// rolls back only itself, commits once, then replies to each. Under
// concurrency, one commit (and, with synchronous=FULL, one fsync) serves the
// whole batch.
type writer struct {
	conn  *sql.Conn
	st    *stmts
	cache *rowCache

	mu     sync.RWMutex // held for reading while sending, for writing by stop
	closed bool
	reqs   chan *writeReq
	done   chan struct{}

	// tx is held by whoever runs a transaction on conn: the writer
	// goroutine for a batch, or a caller running its lone request inline.
	tx sync.Mutex
	// one is the transaction handle of inline writes (under tx).
	one wtx
	// queued counts requests sent to reqs and not yet answered; a caller
	// only runs inline when it is zero, so it never overtakes a queued one.
	queued atomic.Int64
	// fold is the steps' tail (fold.go), under tx.
	fold foldState
}

func startWriter(ctx context.Context, db *sql.DB) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	st, err := prepare(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	fold, err := loadFold(ctx, conn)
	if err != nil {
		st.close()
		conn.Close()
		return nil, err
	}
	w := &writer{conn: conn, st: st, cache: newRowCache(), reqs: make(chan *writeReq, maxBatch), done: make(chan struct{}), fold: fold}
	w.one = wtx{st: st, c: conn, cache: w.cache, fold: &w.fold}
	go w.loop()
	return w, nil
}

// submit queues fn and waits for its result. Once queued, the request is
// always answered: if ctx ends before the writer reaches it, it is skipped
// and fails with ctx's error; once started, it runs to the end, so a nil
// error always means committed and a non-nil one means not written.
func (w *writer) submit(ctx context.Context, fn func(*wtx) (any, error)) (any, error) {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan writeRes, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return nil, ErrClosed
	}
	// (An uncontended request never gets here: write runs it inline.)
	w.queued.Add(1)
	select {
	case w.reqs <- req:
	case <-ctx.Done():
		w.queued.Add(-1)
		w.mu.RUnlock()
		return nil, ctx.Err()
	}
	w.mu.RUnlock()
	res := <-req.done
	return res.v, res.err
}

// stop lets the writer finish the queued requests, then closes the
// connection.
func (w *writer) stop() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.reqs)
	w.mu.Unlock()
	<-w.done
	// Fold the steps' tail, so that the next open starts with none; a
	// failure leaves it to the next write (the reads count it either way).
	_ = w.foldAll()
	// Fold the WAL into the database file and truncate it, when no reader
	// holds it; a failure only leaves a longer WAL for the next open.
	_, _ = w.conn.ExecContext(bg, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return errors.Join(w.st.close(), w.conn.Close())
}

func (w *writer) loop() {
	defer close(w.done)
	batch := make([]*writeReq, 0, maxBatch)
	for req := range w.reqs {
		batch = append(batch[:0], req)
	fill:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		w.tx.Lock()
		w.run(batch)
		w.tx.Unlock()
		w.queued.Add(-int64(len(batch)))
		clear(batch)
	}
}

// run executes one batch as one transaction and replies to every request.
func (w *writer) run(batch []*writeReq) {
	bg := context.Background()
	res := make([]writeRes, len(batch))
	abort := func(err error) {
		_, _ = w.st.rollback.ExecContext(bg)
		w.cache.aborted()
		w.fold.rolledBack()
		for _, r := range batch {
			r.done <- writeRes{err: err}
		}
	}
	if _, err := w.st.begin.ExecContext(bg); err != nil {
		abort(err)
		return
	}
	// A lone request needs no savepoint: on failure the whole tx rolls back.
	single := len(batch) == 1
	tx := &wtx{st: w.st, c: w.conn, cache: w.cache, fold: &w.fold}
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			res[i].err = err
			continue
		}
		if !single {
			if _, err := w.st.savepoint.ExecContext(bg); err != nil {
				abort(err)
				return
			}
		}
		res[i].v, res[i].err = call(r.fn, tx)
		switch {
		case res[i].err == nil && single:
			w.cache.released()
		case res[i].err == nil:
			if _, err := w.st.release.ExecContext(bg); err != nil {
				abort(err)
				return
			}
			w.cache.released()
		case single:
			_, _ = w.st.rollback.ExecContext(bg)
			w.cache.aborted()
			r.done <- res[i]
			return
		case res[i].err != nil:
			// If SQLite already rolled the whole transaction back (I/O
			// error, full disk), ROLLBACK TO fails and everything fails.
			if _, err := w.st.rollbackTo.ExecContext(bg); err != nil {
				abort(fmt.Errorf("%w (after %v)", err, res[i].err))
				return
			}
			w.cache.failed()
			if _, err := w.st.release.ExecContext(bg); err != nil {
				abort(err)
				return
			}
		}
	}
	w.maybeFold(false)
	if _, err := w.st.commit.ExecContext(bg); err != nil {
		abort(fmt.Errorf("commit: %w", err))
		return
	}
	w.cache.committed()
	w.fold.folded()
	for i, r := range batch {
		r.done <- res[i]
	}
}

// call runs fn, turning a panic into an error so the writer survives.
func call(fn func(*wtx) (any, error), tx *wtx) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stepwise: sqlite write panicked: %v", p)
		}
	}()
	return fn(tx)
}

// write runs fn on the writer and returns its typed result.
func write[T any](s *Store, ctx context.Context, fn func(*wtx) (T, error)) (T, error) {
	var zero T
	if err := s.usable(); err != nil {
		return zero, err
	}
	if s.w == nil {
		return zero, ErrReadOnly
	}
	if err := s.ident.check(false); err != nil {
		return zero, err
	}
	if v, err, ran := inline(s.w, ctx, fn); ran {
		if err != nil {
			return zero, mapErr(err)
		}
		return v, nil
	}
	v, err := s.w.submit(ctx, func(tx *wtx) (any, error) { return fn(tx) })
	if err != nil {
		return zero, mapErr(err)
	}
	return v.(T), nil
}

// inline runs fn as a transaction of its own on the caller's goroutine when
// no request is queued and no batch is running (ran true), exactly as the
// writer would run a batch of one — BEGIN IMMEDIATE, fn, COMMIT, a rollback
// on failure, the cancellation check before it starts — without the request,
// its reply channel or the boxing of the result. Otherwise (ran false) the
// caller submits fn to the writer, to be group-committed with the others.
func inline[T any](w *writer, ctx context.Context, fn func(*wtx) (T, error)) (v T, err error, ran bool) {
	var zero T
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return zero, ErrClosed, true
	}
	if w.queued.Load() != 0 || !w.tx.TryLock() {
		return zero, nil, false
	}
	defer w.tx.Unlock()
	if err := ctx.Err(); err != nil {
		return zero, err, true
	}
	fail := func(err error) (T, error, bool) {
		_, _ = w.st.rollback.ExecContext(bg)
		w.cache.aborted()
		w.fold.rolledBack()
		return zero, err, true
	}
	if _, err := w.st.begin.ExecContext(bg); err != nil {
		return fail(err)
	}
	if v, err = callTyped(fn, &w.one); err != nil {
		return fail(err)
	}
	w.cache.released()
	w.maybeFold(false)
	if _, err := w.st.commit.ExecContext(bg); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	w.cache.committed()
	w.fold.folded()
	return v, nil, true
}

// callTyped is call for a typed fn.
func callTyped[T any](fn func(*wtx) (T, error), tx *wtx) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stepwise: sqlite write panicked: %v", p)
		}
	}()
	return fn(tx)
}
