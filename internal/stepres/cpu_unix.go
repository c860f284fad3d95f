//go:build unix

package stepres

import (
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime is the CPU time the process used so far, in nanoseconds
// (CLOCK_PROCESS_CPUTIME_ID), or 0 when the clock cannot be read.
func cpuTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
