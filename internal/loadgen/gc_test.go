package loadgen

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	pct := debug.SetGCPercent(100)
	debug.SetGCPercent(pct)
	return pct
}

func TestTuneGC(t *testing.T) {
	t.Setenv("GOGC", "")
	before := gcPercent()
	restore := TuneGC(DefaultGCPercent)
	if got := gcPercent(); got != DefaultGCPercent {
		t.Fatalf("GC percent %d after TuneGC(%d)", got, DefaultGCPercent)
	}
	restore()
	if got := gcPercent(); got != before {
		t.Fatalf("GC percent %d after restore, want %d", got, before)
	}
	if TuneGC(0)(); gcPercent() != before {
		t.Fatalf("TuneGC(0) changed the GC percent")
	}

	// GOGC in the environment wins.
	t.Setenv("GOGC", "150")
	defer TuneGC(DefaultGCPercent)()
	if got := gcPercent(); got != before {
		t.Fatalf("GC percent %d with GOGC set, want %d unchanged", got, before)
	}
}
