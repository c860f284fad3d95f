//go:build !linux

package cli

import "time"

// postmasterOf is not known on this system: the server's CPU is not
// measured.
func postmasterOf(int) (int, bool) { return 0, false }

func serverCPU(int) time.Duration { return 0 }
