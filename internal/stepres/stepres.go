package stepres

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Usage is what a step used (see the package doc).
type Usage struct {
	CPU          time.Duration // process CPU time, user and system, all threads
	AllocBytes   int64         // heap bytes allocated (/gc/heap/allocs:bytes)
	AllocObjects int64         // heap objects allocated (/gc/heap/allocs:objects)
	// Overlapping is the number of other steps of the process that ran
	// at some point during this one: those running when it started and
	// those that started before it ended.
	Overlapping int
}

// Mark is the reading at a step's start. Its zero value is no reading:
// End answers a zero Usage.
type Mark struct {
	cpu            time.Duration
	bytes, objects uint64
	running        int64  // steps running when this one started, this one included
	started        uint64 // steps started so far, this one included
}

// Steps of the process in flight and started so far, over every engine.
var running atomic.Int64
var started atomic.Uint64

// samples are reused buffers for metrics.Read (it keeps none).
var samples = sync.Pool{New: func() any {
	s := make([]metrics.Sample, 2)
	s[0].Name, s[1].Name = "/gc/heap/allocs:bytes", "/gc/heap/allocs:objects"
	return &s
}}

func allocs() (bytes, objects uint64) {
	p := samples.Get().(*[]metrics.Sample)
	s := *p
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		bytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		objects = s[1].Value.Uint64()
	}
	samples.Put(p)
	return bytes, objects
}

// Start reads the counters at a step's start. Every Start must be
// followed by one End of its Mark, else the steps after it count one
// overlapping step too many.
func Start() Mark {
	m := Mark{running: running.Add(1), started: started.Add(1)}
	m.bytes, m.objects = allocs()
	m.cpu = cpuTime()
	return m
}

// End reads the counters at the step's end and returns what the step used
// since Start.
func (m Mark) End() Usage {
	if m.started == 0 {
		return Usage{}
	}
	cpu := cpuTime()
	bytes, objects := allocs()
	running.Add(-1)
	u := Usage{Overlapping: int(m.running-1) + int(started.Load()-m.started)}
	if cpu > m.cpu && m.cpu > 0 {
		u.CPU = cpu - m.cpu
	}
	if bytes >= m.bytes {
		u.AllocBytes = int64(bytes - m.bytes)
	}
	if objects >= m.objects {
		u.AllocObjects = int64(objects - m.objects)
	}
	return u
}
