package loadgen

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the garbage-collection target (GOGC) that `stepwise
// serve` and Run run with. A streaming server's live heap is mostly
// long-lived (connection buffers, the engine's rings of recent events),
// while each delta leaves a little short-lived garbage: with Go's default
// of 100 the collector runs several times a second at 1,000 streams and
// its assists make the delivery tail. At 400 it runs about a quarter as
// often, for a heap that may grow to five times the live data between
// collections instead of twice; see docs/http_api.md for the measured
// latency and memory. GOGC in the environment, or --gc-percent, overrides
// it; GOMEMLIMIT bounds the heap whatever the percentage.
const DefaultGCPercent = 400

// TuneGC sets the collector's target to pct (see DefaultGCPercent) unless
// the GOGC environment variable is set or pct is 0, and returns a function
// that restores the previous target. A negative pct turns the collector
// off, as GOGC=off does (only sensible with GOMEMLIMIT).
func TuneGC(pct int) (restore func()) {
	if pct == 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(pct)
	return func() { debug.SetGCPercent(prev) }
}
