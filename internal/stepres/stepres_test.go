package stepres

import (
	"github.com/stepwise-run/stepwise/internal/raceflag"
	"runtime"
	"sync"
	"testing"
	"time"
)

var sink [][]byte

// TestUsageOfAStep: a step that burns CPU and allocates 4 MiB in 1,024
// objects reads at least that much, and no overlapping step; two steps at
// once read one overlapping step each, and a step started and ended
// inside another counts for it.
func TestUsageOfAStep(t *testing.T) {
	m := Start()
	deadline := time.Now().Add(20 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	for range 1024 {
		sink = append(sink, make([]byte, 4096))
	}
	u := m.End()
	sink = nil
	if u.CPU < 10*time.Millisecond {
		t.Errorf("CPU %v for a 20 ms busy loop", u.CPU)
	}
	if u.AllocBytes < 4<<20 || u.AllocObjects < 1024 {
		t.Errorf("allocated %d bytes in %d objects, want at least 4 MiB in 1,024", u.AllocBytes, u.AllocObjects)
	}
	if u.Overlapping != 0 {
		t.Errorf("a step alone overlaps %d", u.Overlapping)
	}

	outer := Start()
	inner := Start()
	if got := inner.End().Overlapping; got != 1 {
		t.Errorf("inner step: %d overlapping, want 1 (the outer)", got)
	}
	if got := outer.End().Overlapping; got != 1 {
		t.Errorf("outer step: %d overlapping, want 1 (the inner)", got)
	}

	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(3)
	got := make([]int, 3)
	for i := range 3 {
		wg.Go(func() {
			m := Start()
			ready.Done()
			ready.Wait() // all three have started before any ends
			got[i] = m.End().Overlapping
		})
	}
	wg.Wait()
	for i, n := range got {
		if n != 2 {
			t.Errorf("step %d of three at once: %d overlapping, want 2", i, n)
		}
	}
	if (Mark{}).End() != (Usage{}) {
		t.Error("the zero Mark reads a usage")
	}
}

// TestStartEndAllocateNothing: measuring a step allocates nothing, so
// that the engine's allocation budget per step holds.
func TestStartEndAllocateNothing(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("the race detector allocates; scripts/test runs this without -race")
	}
	if n := testing.AllocsPerRun(1000, func() { Start().End() }); n != 0 {
		t.Errorf("Start and End allocate %.1f times", n)
	}
	runtime.KeepAlive(sink)
}

func BenchmarkStartEnd(b *testing.B) {
	for b.Loop() {
		Start().End()
	}
}

func BenchmarkCPUTime(b *testing.B) {
	for b.Loop() {
		cpuTime()
	}
}

func BenchmarkAllocs(b *testing.B) {
	for b.Loop() {
		allocs()
	}
}
