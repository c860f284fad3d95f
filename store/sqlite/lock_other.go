//go:build !unix

package sqlite

// fileLock is a no-op where flock is unavailable: the process-exclusion
// guarantee documented on Open holds on unix systems only.
type fileLock struct{}

func lockPath(string) (*fileLock, error) { return &fileLock{}, nil }

func (l *fileLock) release() error { return nil }
