package faultstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// ErrInjected marks every fault this package injects.
var ErrInjected = errors.New("stepwise: faultstore: injected fault")

// Config is a fault schedule. Each rate is the probability, in [0, 1], of
// that fault on one call it applies to; zero rates inject nothing.
type Config struct {
	// Seed fixes the schedule.
	Seed int64
	// Error fails a call before it reaches the store (nothing written),
	// with an error wrapping store.ErrUnavailable.
	Error float64
	// Ambiguous lets a write commit, then fails it towards the caller with
	// an error wrapping store.ErrUnavailable: the commit is ambiguous.
	Ambiguous float64
	// Full fails a write before it reaches the store with an error
	// wrapping store.ErrStorageFull.
	Full float64
	// Latency delays a call by up to MaxLatency before it reaches the
	// store (cut short when the call's context ends).
	Latency    float64
	MaxLatency time.Duration
	// RenewFail fails RunLeaseRenew (nothing renewed).
	RenewFail float64
	// NotifyLost loses a notification received from the store's Notifier
	// in a simulated reconnect (an empty payload takes its place, as the
	// Notifier contract says); NotifyDelay delivers one up to
	// MaxNotifyDelay late.
	NotifyLost     float64
	NotifyDelay    float64
	MaxNotifyDelay time.Duration
	// ByTime decides each call's faults from the seed, the operation and
	// its parameters (their JSON, ids and a step's measured resource use
	// left out), the clock's reading and how many such calls came at that
	// reading, instead of from the call's number. Under a fake clock
	// (testing/synctest) the schedule then does not depend on how
	// goroutines running at one instant interleave, as long as their calls
	// differ by more than ids. The resource use (CPU time, heap
	// allocation, overlapping steps: steptype.Metrics) is the machine's
	// reading, not the program's: keyed on it, a seed would not fix its
	// schedule.
	ByTime bool
}

func (c Config) validate() error {
	for name, r := range map[string]float64{"Error": c.Error, "Ambiguous": c.Ambiguous, "Full": c.Full, "Latency": c.Latency,
		"RenewFail": c.RenewFail, "NotifyLost": c.NotifyLost, "NotifyDelay": c.NotifyDelay} {
		if r < 0 || r > 1 {
			return fmt.Errorf("%w: faultstore: Config.%s %v: want a rate in [0, 1]", store.ErrInvalid, name, r)
		}
	}
	if c.MaxLatency < 0 || c.MaxNotifyDelay < 0 {
		return fmt.Errorf("%w: faultstore: negative delay", store.ErrInvalid)
	}
	return nil
}

// Fault names one kind of injected fault, as counted by Store.Injected.
type Fault string

// The faults.
const (
	FaultError       Fault = "error"
	FaultAmbiguous   Fault = "ambiguous"
	FaultFull        Fault = "full"
	FaultLatency     Fault = "latency"
	FaultRenewFail   Fault = "renew_fail"
	FaultNotifyLost  Fault = "notify_lost"
	FaultNotifyDelay Fault = "notify_delay"
)

// Store wraps a store.Store and injects the faults of its Config while
// enabled (from New on).
type Store struct {
	store.Store
	cfg     Config
	enabled atomic.Bool
	down    atomic.Bool
	calls   atomic.Uint64

	mu       sync.Mutex
	injected map[Fault]int
	instant  time.Time      // ByTime: the last reading
	atOp     map[string]int // ByTime: calls per operation at instant
}

// New wraps inner with the fault schedule cfg, enabled. It panics on an
// invalid cfg (rates outside [0, 1], negative delays): a schedule is a
// test's constant.
func New(inner store.Store, cfg Config) *Store {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	s := &Store{Store: inner, cfg: cfg, injected: map[Fault]int{}}
	s.enabled.Store(true)
	return s
}

// Inner returns the wrapped store, which sees no faults.
func (s *Store) Inner() store.Store { return s.Store }

// SetEnabled turns fault injection on or off; calls and notifications in
// flight keep the decision they were made with.
func (s *Store) SetEnabled(on bool) { s.enabled.Store(on) }

// SetDown cuts the store off (on) or reconnects it (off), whatever the
// schedule and SetEnabled say: while down, every call fails before it
// reaches the inner store with an error wrapping store.ErrUnavailable, and
// notifications are dropped. It stands for a process that crashed (a
// simulation drops an engine by setting its store down) or a database
// that is gone. A call already past the check goes on, as a write in
// flight when a process dies may still commit.
func (s *Store) SetDown(on bool) { s.down.Store(on) }

// Injected returns how many faults of each kind were injected so far.
func (s *Store) Injected() map[Fault]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Fault]int, len(s.injected))
	for k, v := range s.injected {
		out[k] = v
	}
	return out
}

// Calls returns how many calls the store has seen.
func (s *Store) Calls() uint64 { return s.calls.Load() }

func (s *Store) count(f Fault) {
	s.mu.Lock()
	s.injected[f]++
	s.mu.Unlock()
}

// decision is the schedule's verdict on one call: a few independent
// uniform draws in [0, 1) derived from the seed and the call number.
type decision struct {
	n     uint64
	draws [6]float64
}

func (s *Store) decide(op string, params any) decision {
	n := s.calls.Add(1)
	d := decision{n: n}
	key := n
	if s.cfg.ByTime {
		now := time.Now()
		b, _ := json.Marshal(params)
		call := op + " " + callKey(b)
		s.mu.Lock()
		if !now.Equal(s.instant) {
			s.instant, s.atOp = now, map[string]int{}
		}
		s.atOp[call]++
		k := s.atOp[call]
		s.mu.Unlock()
		h := fnv.New64a()
		fmt.Fprintf(h, "%s %d %d", call, now.UnixNano(), k)
		key = h.Sum64()
	}
	x := uint64(s.cfg.Seed)*0x9E3779B97F4A7C15 ^ key
	for i := range d.draws {
		x = splitmix(x)
		d.draws[i] = float64(x>>11) / (1 << 53)
	}
	return d
}

// uuidRE matches the ids ByTime leaves out; usageRE the resource use of
// a step (the wire fields of steptype.Metrics the engine measures).
var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	usageRE = regexp.MustCompile(`"(?:cpu_time_ns|alloc_bytes|alloc_objects|overlapping_steps)":-?[0-9]+,?`)
)

// callKey is what ByTime keys a call on: the JSON of its parameters
// without ids and resource use.
func callKey(params []byte) string {
	return usageRE.ReplaceAllString(uuidRE.ReplaceAllString(string(params), ""), "")
}

// splitmix is one step of SplitMix64.
func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	z := x
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// before applies the faults that strike before a call reaches the store:
// latency, then an error (or, for writes, a full disk). It returns the
// decision for after.
func (s *Store) before(ctx context.Context, op string, params any, write bool) (decision, error) {
	d := s.decide(op, params)
	if s.down.Load() {
		return d, fmt.Errorf("%w: %w: %s (call %d, store down)", store.ErrUnavailable, ErrInjected, op, d.n)
	}
	if !s.enabled.Load() {
		return decision{}, nil
	}
	if d.draws[0] < s.cfg.Latency && s.cfg.MaxLatency > 0 {
		s.count(FaultLatency)
		t := time.NewTimer(time.Duration(d.draws[1] * float64(s.cfg.MaxLatency)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return d, ctx.Err()
		}
	}
	if d.draws[2] < s.cfg.Error {
		s.count(FaultError)
		return d, fmt.Errorf("%w: %w: %s (call %d, not sent)", store.ErrUnavailable, ErrInjected, op, d.n)
	}
	if write && d.draws[3] < s.cfg.Full {
		s.count(FaultFull)
		return d, fmt.Errorf("%w: %w: %s (call %d, disk full)", store.ErrStorageFull, ErrInjected, op, d.n)
	}
	return d, nil
}

// after turns a committed write into an ambiguous one when the schedule
// says so.
func (s *Store) after(d decision, op string, err error) error {
	if err != nil || d.n == 0 || !s.enabled.Load() || d.draws[4] >= s.cfg.Ambiguous {
		return err
	}
	s.count(FaultAmbiguous)
	return fmt.Errorf("%w: %w: %s (call %d, committed, answer lost)", store.ErrUnavailable, ErrInjected, op, d.n)
}

// read runs a read under the schedule.
func read[T any](s *Store, ctx context.Context, op string, params any, fn func() (T, error)) (T, error) {
	var zero T
	if _, err := s.before(ctx, op, params, false); err != nil {
		return zero, err
	}
	return fn()
}

// write runs a write under the schedule.
func write[T any](s *Store, ctx context.Context, op string, params any, fn func() (T, error)) (T, error) {
	var zero T
	d, err := s.before(ctx, op, params, true)
	if err != nil {
		return zero, err
	}
	v, err := fn()
	if err = s.after(d, op, err); err != nil {
		return zero, err
	}
	return v, nil
}
