package sqlite

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// Config configures Open. The zero value of every field but Path is a
// documented default.
type Config struct {
	// Path is the database file, required. It is created (with its WAL
	// files and Path+".lock") when missing; its directory must exist.
	Path string
	// Synchronous is SQLite's synchronous level in WAL mode: "NORMAL"
	// (default; a committed step survives a process crash, a power loss may
	// roll back the last transactions) or "FULL" (also survives power loss,
	// one fsync per group commit). Case-insensitive.
	Synchronous string
	// ReadOnly opens the database for reading only: no lock file is taken,
	// no migration runs (the schema must exist), and every write fails with
	// ErrReadOnly. Any number of read-only stores may share a file with one
	// writer, in this process or another.
	ReadOnly bool
	// BusyTimeout is how long a connection waits for a lock held by another
	// connection before the call fails with store.ErrLocked. Default 5s.
	BusyTimeout time.Duration
	// Readers is the size of the pool of read-only connections that serve
	// every read, concurrently with the writer. Default 4.
	Readers int
	// MaxBytes caps the database file (SQLite's max_page_count, in pages of
	// 4 KiB): a write that would grow it further fails with
	// store.ErrStorageFull and stores nothing, as on a full disk. Default 0:
	// no cap but the disk's.
	MaxBytes int64
}

// Defaults.
const (
	DefaultSynchronous = "NORMAL"
	DefaultBusyTimeout = 5 * time.Second
	DefaultReaders     = 4
)

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Synchronous == "" {
		c.Synchronous = DefaultSynchronous
	}
	c.Synchronous = strings.ToUpper(c.Synchronous)
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.Readers == 0 {
		c.Readers = DefaultReaders
	}
	return c
}

// validate reports a configuration error wrapping store.ErrInvalid.
func (c Config) validate() error {
	switch {
	case c.Path == "":
		return fmt.Errorf("%w: sqlite: Config.Path is required", store.ErrInvalid)
	case c.Synchronous != "NORMAL" && c.Synchronous != "FULL":
		return fmt.Errorf("%w: sqlite: Config.Synchronous %q: want NORMAL or FULL", store.ErrInvalid, c.Synchronous)
	case c.BusyTimeout < 0:
		return fmt.Errorf("%w: sqlite: negative Config.BusyTimeout %v", store.ErrInvalid, c.BusyTimeout)
	case c.Readers < 0:
		return fmt.Errorf("%w: sqlite: negative Config.Readers %d", store.ErrInvalid, c.Readers)
	case c.MaxBytes < 0:
		return fmt.Errorf("%w: sqlite: negative Config.MaxBytes %d", store.ErrInvalid, c.MaxBytes)
	}
	return nil
}

// dsn returns the modernc.org/sqlite DSN of one connection role: the
// writer, or a (query-only) reader.
func (c Config) dsn(abs string, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+c.Synchronous+")")
		if c.MaxBytes > 0 {
			q.Add("_pragma", fmt.Sprintf("max_page_count(%d)", (c.MaxBytes+4095)/4096))
		}
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	if c.ReadOnly {
		q.Set("mode", "ro")
	}
	u := url.URL{Path: filepath.ToSlash(abs)}
	return "file:" + u.EscapedPath() + "?" + q.Encode()
}
