//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time so far: on a shared
// machine it moves far less with the load than wall time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
