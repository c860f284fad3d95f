package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// lazyPatience is how long a lazy write waits for another transaction's
// synchronous commit to make it durable before it commits one of its own.
// A finished task is followed at once by the commit of the step that
// waited for it, well within this.
const lazyPatience = 2 * time.Millisecond

// commits counts a Store's synchronous commits, so that a write committed
// lazily (synchronous_commit off: visible at once, flushed later) can wait
// for a later synchronous commit to flush it instead of flushing the WAL
// itself. The WAL is flushed in order: a synchronous commit sent after a
// lazy one returned has its commit record after the lazy one's, and its
// success means both are on disk.
type commits struct {
	sent atomic.Uint64 // synchronous commits sent so far: each one's number

	mu   sync.Mutex
	done uint64        // the highest number of a synchronous commit that succeeded
	grew chan struct{} // closed when done grows; nil until someone waits
}

// begin numbers a synchronous commit about to be sent.
func (c *commits) begin() uint64 { return c.sent.Add(1) }

// succeeded records that synchronous commit n succeeded.
func (c *commits) succeeded(n uint64) {
	c.mu.Lock()
	if n > c.done {
		c.done = n
		if c.grew != nil {
			close(c.grew)
			c.grew = nil
		}
	}
	c.mu.Unlock()
}

// mark returns what after waits to pass: the number of the last
// synchronous commit sent before now.
func (c *commits) mark() uint64 { return c.sent.Load() }

// after waits up to patience for a synchronous commit sent after mark to
// succeed, and reports whether one did.
func (c *commits) after(ctx context.Context, mark uint64, patience time.Duration) bool {
	var timer *time.Timer
	for {
		c.mu.Lock()
		if c.done > mark {
			c.mu.Unlock()
			return true
		}
		if c.grew == nil {
			c.grew = make(chan struct{})
		}
		grew := c.grew
		c.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(patience)
			defer timer.Stop()
		}
		select {
		case <-grew:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// lazy makes the transaction commit with synchronous_commit off: its
// COMMIT returns before the WAL is flushed, and does not count as a
// synchronous commit.
func (t *wtx) lazy(b *pgx.Batch) {
	b.Queue(`SET LOCAL synchronous_commit TO off`)
	t.async = true
}

// durable makes the lazy writes that returned before it was called
// durable: by a synchronous commit of another transaction sent after it
// was called, when one succeeds within lazyPatience, else by one of its
// own, a no-op update of task id.
func (s *Store) durable(ctx context.Context, mark uint64, id string) error {
	if s.commits.after(ctx, mark, lazyPatience) {
		return nil
	}
	_, err := inTx(s, ctx, func(tx *wtx) (struct{}, error) {
		tag, err := tx.Exec(ctx, `UPDATE tasks SET updated_at = updated_at WHERE id = $1`, id)
		tx.flushes = err == nil && tag.RowsAffected() > 0
		return struct{}{}, err
	})
	return err
}
