package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// fileCheckEvery is how often, at most, a write checks that the path
// still names the file the store opened: one stat per interval, whatever
// the write rate.
const fileCheckEvery = 100 * time.Millisecond

// ErrFileReplaced is returned by every write of a store whose database
// file was deleted, renamed away or replaced since it was opened: what it
// would write would go to a file no later open sees. It wraps
// store.ErrUnavailable. Reopen the store (restart the process) to go on.
var ErrFileReplaced = fmt.Errorf("%w: sqlite: the database file was deleted or replaced under the open store", store.ErrUnavailable)

// fileIdent watches the identity (device and inode) of the database file.
type fileIdent struct {
	path   string
	opened os.FileInfo
	start  time.Time    // base of last, a monotonic clock
	last   atomic.Int64 // nanoseconds after start of the last check
	mu     sync.Mutex
	gone   error // set once, never cleared
}

func newFileIdent(path string) (*fileIdent, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return &fileIdent{path: path, opened: fi, start: time.Now()}, nil
}

// check returns the error of a file that is no longer the one opened. It
// stats the path at most once per fileCheckEvery unless force is set.
func (f *fileIdent) check(force bool) error {
	if f == nil {
		return nil
	}
	now := int64(time.Since(f.start))
	if last := f.last.Load(); !force && now-last < int64(fileCheckEvery) {
		return f.err()
	}
	f.last.Store(now)
	if err := f.err(); err != nil {
		return err
	}
	fi, err := os.Stat(f.path)
	var cause error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cause = fmt.Errorf("%w: %s no longer exists; writes are refused (restart to reopen)", ErrFileReplaced, f.path)
	case err != nil:
		return nil // cannot tell (a permission change): the next check may
	case !os.SameFile(f.opened, fi):
		cause = fmt.Errorf("%w: %s is now another file; writes are refused (restart to reopen)", ErrFileReplaced, f.path)
	default:
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone == nil {
		f.gone = cause
	}
	return f.gone
}

func (f *fileIdent) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone
}

// Health reports whether the store can take writes: nil, or why not (a
// closed store; a database file deleted or replaced since it was opened,
// wrapping ErrFileReplaced). It checks the file now.
func (s *Store) Health(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.ident.check(true)
}
