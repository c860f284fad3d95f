//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// fileLock is an exclusive flock on PATH+".lock" holding the owner's pid. A
// flock belongs to an open file description, so it excludes other processes
// and other Opens in the same process alike, and the kernel drops it when
// the process dies.
type fileLock struct{ f *os.File }

func lockPath(dbPath string) (*fileLock, error) {
	name := dbPath + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid := strings.TrimSpace(string(b[:n]))
			if pid == "" {
				pid = "unknown"
			}
			return nil, &lockedError{path: dbPath, pid: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	// The pid is informational (for the error of the next opener); failing
	// to write it does not weaken the lock.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &fileLock{f: f}, nil
}

func (l *fileLock) release() error {
	if l == nil {
		return nil
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}
