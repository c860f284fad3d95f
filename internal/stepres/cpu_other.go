//go:build !unix

package stepres

import "time"

// cpuTime is 0: the process CPU clock is read on Unix systems only.
func cpuTime() time.Duration { return 0 }
