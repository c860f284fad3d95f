package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/faultstore"
	"github.com/stepwise-run/stepwise/store/memory"
)

// Config is one simulation.
type Config struct {
	// Seed fixes the run.
	Seed int64
	// Faults turns on store faults and crashes for the first FaultPhase of
	// simulated time; without them Run makes the reference run.
	Faults bool
	// Sessions is how many sessions run at once (default 3), Turns how
	// many runs each has, one after the other (default 2).
	Sessions, Turns int
	// Want, when set, are the transcripts the sessions must end with, by
	// session index: those of a run without faults (Result.Transcripts).
	Want []string
}

// FaultPhase is how long faults and crashes last, in simulated time;
// afterwards the simulation drains.
const FaultPhase = 20 * time.Second

// The bounds of a simulation, in simulated time.
const (
	lease        = 3 * time.Second
	pollInterval = 200 * time.Millisecond
	runDeadline  = 10 * time.Minute // for every run to complete
	maxCrashes   = 3
	engines      = 2 // engines alive at once
)

func (c Config) withDefaults() Config {
	if c.Sessions == 0 {
		c.Sessions = 3
	}
	if c.Turns == 0 {
		c.Turns = 2
	}
	return c
}

// Result is what a simulation did.
type Result struct {
	// Trace is every event of the simulation, "<simulated time> <event>",
	// in time order; Hash is its SHA-256.
	Trace []string
	Hash  string
	// Transcripts are the sessions' canonical transcripts (no ids, no
	// times), by session index.
	Transcripts []string
	// Counters.
	Crashes, Answers, Reconnects, Executions, Calls int
	// AnswerRepeats counts the answered requests a stream delivered twice
	// (see checkStreams).
	AnswerRepeats int
	Injected      map[faultstore.Fault]int
	// Elapsed is the simulated time the run took.
	Elapsed time.Duration
}

// world is the state of one simulation.
type world struct {
	cfg   Config
	inner *shared
	start time.Time
	ctx   context.Context // ends with the simulation

	mu            sync.Mutex
	nodes         []*node // every engine started, dead ones included
	incarnations  int
	trace         []string
	broken        []string       // invariants found broken
	sessions      []string       // session ids by index
	sessIdx       map[string]int // session id → index
	execs         map[string]int // idempotency key → side effects
	streams       []*stream      // one per run
	injected      map[faultstore.Fault]int
	counts        struct{ crashes, answers, reconnects int }
	answerRepeats int         // see checkStreams
	faultsOn      atomic.Bool // the fault phase began (after the setup)
	faultsOver    atomic.Bool
	actors        sync.WaitGroup // human, crasher, sampler
	streamsWG     sync.WaitGroup
	closing       sync.WaitGroup // Close of crashed engines
	ownerSerial   string
}

// Run runs one simulation and checks its invariants; it returns the first
// broken one, naming the seed. Call it inside a testing/synctest bubble.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &world{cfg: cfg, inner: newShared(memory.New()), start: time.Now(), ctx: ctx, sessIdx: map[string]int{}, execs: map[string]int{},
		injected: map[faultstore.Fault]int{}, ownerSerial: stepwise.NewID()}
	err := w.run(ctx)
	cancel()
	w.shutdown()
	res := w.result()
	if err == nil && len(w.broken) > 0 {
		err = errors.New(strings.Join(w.broken, "; "))
	}
	if err != nil {
		return res, fmt.Errorf("seed %d (replay: STEPWISE_SIM_SEED=%d): %w", cfg.Seed, cfg.Seed, err)
	}
	return res, nil
}

func (w *world) run(ctx context.Context) error {
	w.startNode(ctx)
	for i := range w.cfg.Sessions {
		// Ids of the seed's own (not UUIDs, which the fault schedules
		// leave out): the schedules tell the sessions' calls apart.
		s, err := w.inner.SessionCreate(ctx, &store.SessionCreateParams{ID: fmt.Sprintf("sim-session-%d", i), Agent: "worker", Title: fmt.Sprintf("session %d", i)})
		if err != nil {
			return fmt.Errorf("create session %d: %w", i, err)
		}
		w.sessions = append(w.sessions, s.ID)
		w.sessIdx[s.ID] = i
	}
	// The second engine starts a random instant later, so that the polls
	// and heartbeats of two engines never fall on the same instant.
	sleep(ctx, w.dur("start", 0, time.Millisecond, 100*time.Millisecond))
	for range engines - 1 {
		w.startNode(ctx)
	}
	w.faultsOn.Store(w.cfg.Faults)
	w.setFaults(w.cfg.Faults)
	w.actors.Add(3)
	go w.human(ctx)
	go w.crasher(ctx)
	go w.sampler(ctx)
	var drivers sync.WaitGroup
	errs := make([]error, w.cfg.Sessions)
	for i := range w.cfg.Sessions {
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			errs[i] = w.drive(ctx, i)
		}()
	}
	drivers.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	w.logf("all runs completed")
	return w.check(ctx)
}

// node is one engine and its store.
type node struct {
	id     int
	eng    *stepwise.Engine
	fs     *faultstore.Store
	ctx    context.Context // its streams; cancelled when it crashes
	cancel context.CancelFunc
	dead   atomic.Bool
	closed bool
}

// schedule is the fault schedule of an engine incarnation.
func schedule(seed int64) faultstore.Config {
	return faultstore.Config{Seed: seed, Error: 0.03, Ambiguous: 0.02, Full: 0.01, Latency: 0.2, MaxLatency: 20 * time.Millisecond,
		RenewFail: 0.2, NotifyLost: 0.2, NotifyDelay: 0.2, MaxNotifyDelay: 50 * time.Millisecond, ByTime: true}
}

func (w *world) startNode(ctx context.Context) *node {
	w.mu.Lock()
	w.incarnations++
	id := w.incarnations
	w.mu.Unlock()
	n := &node{id: id, fs: faultstore.New(w.inner, schedule(w.cfg.Seed*7919+int64(id)))}
	n.fs.SetEnabled(w.faultsOn.Load() && !w.faultsOver.Load())
	n.ctx, n.cancel = context.WithCancel(ctx)
	eng, err := stepwise.New(stepwise.Config{Store: n.fs, Agents: []*stepwise.Agent{w.agent(n)}, Lease: lease, PollInterval: pollInterval,
		Owner: fmt.Sprintf("node%d-%s", id, w.ownerSerial), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err) // a constant configuration
	}
	n.eng = eng
	if err := eng.Start(n.ctx); err != nil {
		panic(err)
	}
	w.mu.Lock()
	w.nodes = append(w.nodes, n)
	w.mu.Unlock()
	w.logf("node %d started", id)
	return n
}

// live returns the engines alive, in start order.
func (w *world) live() []*node {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*node
	for _, n := range w.nodes {
		if !n.dead.Load() {
			out = append(out, n)
		}
	}
	return out
}

func (w *world) pick(rng *rand.Rand) *node {
	l := w.live()
	return l[rng.IntN(len(l))]
}

// setFaults turns the schedules of every engine on or off.
func (w *world) setFaults(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.nodes {
		n.fs.SetEnabled(on)
	}
}

// crash drops an engine as a SIGKILL would: its store is cut off first (no
// write of it reaches the store any more), then it is dead (its tools act
// no more) and its streams are cut. gone: its process is gone (the engine
// closes, so the others take its leases over at once, as on an exclusive
// store after a restart); else its leases lapse first.
func (w *world) crash(n *node, gone bool) {
	n.fs.SetDown(true)
	n.dead.Store(true)
	n.cancel()
	w.mu.Lock()
	w.counts.crashes++
	w.mu.Unlock()
	w.logf("node %d crashed (gone %v)", n.id, gone)
	if gone {
		w.closeNode(n)
	}
}

func (w *world) closeNode(n *node) {
	w.mu.Lock()
	if n.closed {
		w.mu.Unlock()
		return
	}
	n.closed = true
	w.mu.Unlock()
	w.closing.Add(1)
	go func() {
		defer w.closing.Done()
		_ = n.eng.Close()
	}()
}

// crasher crashes a random engine now and then during the fault phase,
// and starts another in its place.
func (w *world) crasher(ctx context.Context) {
	defer w.actors.Done()
	if !w.cfg.Faults {
		return
	}
	rng := w.rng("crasher", 0)
	for range maxCrashes {
		if !sleep(ctx, time.Duration(500+rng.IntN(6000))*time.Millisecond) || w.faultsOver.Load() {
			return
		}
		w.crash(w.pick(rng), rng.IntN(2) == 0)
		if !sleep(ctx, time.Duration(rng.IntN(500_000_000))) {
			return
		}
		w.startNode(ctx)
	}
}

// sampler checks the one-unfinished-run invariant all along and ends the
// fault phase.
func (w *world) sampler(ctx context.Context) {
	defer w.actors.Done()
	for ctx.Err() == nil {
		if !w.faultsOver.Load() && time.Since(w.start) >= FaultPhase {
			w.faultsOver.Store(true)
			w.setFaults(false)
			w.logf("faults over")
		}
		runs, err := w.inner.RunList(context.Background(), &store.RunListParams{})
		if err != nil {
			w.fail("list runs: %v", err)
			return
		}
		open := map[string]int{}
		for _, r := range runs {
			if !r.Status.Terminal() && r.ParentRunID == "" {
				if open[r.SessionID]++; open[r.SessionID] == 2 {
					w.fail("session %d has two unfinished runs", w.sessIdx[r.SessionID])
				}
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// human answers waiting approvals at random moments, through a random
// engine; an answer lost to a fault is given again later.
func (w *world) human(ctx context.Context) {
	defer w.actors.Done()
	rng := w.rng("human", 0)
	for sleep(ctx, time.Duration(50+rng.IntN(1500))*time.Millisecond) {
		n := w.pick(rng)
		pending, err := n.eng.Pending(ctx, "")
		if err != nil {
			continue
		}
		sort.Slice(pending, func(i, j int) bool {
			a, b := pending[i], pending[j]
			if w.sessIdx[a.SessionID] != w.sessIdx[b.SessionID] {
				return w.sessIdx[a.SessionID] < w.sessIdx[b.SessionID]
			}
			return a.Step.Sequence < b.Step.Sequence
		})
		for _, p := range pending {
			if rng.IntN(3) == 0 {
				continue // later
			}
			_, err := n.eng.Answer(ctx, stepwise.AnswerParams{RunID: p.RunID, RequestID: p.RequestID, Answer: []byte(`{"approved":true}`)})
			w.mu.Lock()
			if err == nil {
				w.counts.answers++
			}
			w.mu.Unlock()
			w.logf("answer session %d step %d via node %d: %s", w.sessIdx[p.SessionID], p.Step.Sequence, n.id, outcome(err))
		}
	}
}

// drive runs the turns of session i one after the other, through random
// engines.
func (w *world) drive(ctx context.Context, i int) error {
	rng := w.rng("driver", i)
	sid := w.sessions[i]
	// Each driver starts at an instant of its own: calls at one instant
	// interleave as the Go scheduler pleases.
	if !sleep(ctx, time.Duration(rng.Int64N(int64(50*time.Millisecond)))) {
		return ctx.Err()
	}
	for turn := range w.cfg.Turns {
		runID := ""
		for runID == "" {
			// A start whose commit was ambiguous did start the run.
			if id, err := w.runOf(sid, turn); err != nil {
				return err
			} else if id != "" {
				runID = id
				break
			}
			n := w.pick(rng)
			r, err := n.eng.StartRun(ctx, stepwise.StartParams{Agent: "worker", SessionID: sid, Input: fmt.Sprintf("task %d turn %d", i, turn)})
			w.logf("start session %d turn %d via node %d: %s", i, turn, n.id, outcome(err))
			if err == nil {
				runID = r.ID
			} else if !sleep(ctx, time.Duration(50+rng.IntN(200))*time.Millisecond) {
				return ctx.Err()
			}
		}
		w.watch(ctx, i, turn, runID)
		if err := w.await(ctx, runID); err != nil {
			return fmt.Errorf("session %d turn %d: %w", i, turn, err)
		}
		w.logf("session %d turn %d completed", i, turn)
	}
	return nil
}

// runOf returns the id of the turn-th top-level run of a session, or "".
func (w *world) runOf(sid string, turn int) (string, error) {
	runs, err := w.inner.RunList(context.Background(), &store.RunListParams{SessionID: sid})
	if err != nil {
		return "", err
	}
	var ids []string
	for _, r := range runs {
		if r.ParentRunID == "" {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids) // UUIDv7: creation order
	if len(ids) > turn {
		return ids[turn], nil
	}
	return "", nil
}

// await waits for a run to end and requires it completed: a store fault or
// a crash stops an execution, it never fails the run.
func (w *world) await(ctx context.Context, runID string) error {
	for {
		r, err := w.inner.RunGet(context.Background(), &store.RunGetParams{ID: runID})
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			if r.Status != steptype.RunCompleted {
				return fmt.Errorf("run ended %s (%+v)", r.Status, r.Error)
			}
			return nil
		}
		if time.Since(w.start) > runDeadline {
			return fmt.Errorf("run still %s after %v", r.Status, runDeadline)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// shutdown closes every engine and waits for every goroutine of the
// simulation, so that its bubble ends.
func (w *world) shutdown() {
	w.actors.Wait()
	w.streamsWG.Wait()
	w.mu.Lock()
	nodes := slices.Clone(w.nodes)
	w.mu.Unlock()
	for _, n := range nodes {
		n.cancel()
		w.closeNode(n)
	}
	w.closing.Wait()
}

func (w *world) result() *Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := &Result{Crashes: w.counts.crashes, Answers: w.counts.answers, Reconnects: w.counts.reconnects, AnswerRepeats: w.answerRepeats, Injected: map[faultstore.Fault]int{},
		Elapsed: time.Since(w.start)}
	for _, n := range w.execs {
		res.Executions += n
	}
	for _, n := range w.nodes {
		res.Calls += int(n.fs.Calls())
		for f, k := range n.fs.Injected() {
			res.Injected[f] += k
		}
	}
	for _, sid := range w.sessions {
		t, err := transcript(w.inner, sid)
		if err != nil {
			t = "error: " + err.Error()
		}
		res.Transcripts = append(res.Transcripts, t)
	}
	res.Trace = slices.Clone(w.trace)
	sort.Strings(res.Trace)
	h := sha256.New()
	for _, l := range res.Trace {
		_, _ = io.WriteString(h, l+"\n")
	}
	for _, t := range res.Transcripts {
		_, _ = io.WriteString(h, t)
	}
	res.Hash = hex.EncodeToString(h.Sum(nil))
	return res
}

// logf adds an event to the trace, stamped with the simulated time.
func (w *world) logf(format string, args ...any) {
	line := fmt.Sprintf("%014.6f %s", time.Since(w.start).Seconds(), fmt.Sprintf(format, args...))
	w.mu.Lock()
	w.trace = append(w.trace, line)
	w.mu.Unlock()
}

// fail records a broken invariant.
func (w *world) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.logf("BROKEN %s", msg)
	w.mu.Lock()
	w.broken = append(w.broken, msg)
	w.mu.Unlock()
}

// rng returns the random source of one actor: each has its own, so the
// order in which actors draw does not change what each draws.
func (w *world) rng(actor string, i int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(w.cfg.Seed), hash(actor, i)))
}

// dur is a duration in [lo, hi) fixed by the seed and a key.
func (w *world) dur(key string, i int, lo, hi time.Duration) time.Duration {
	r := rand.New(rand.NewPCG(uint64(w.cfg.Seed), hash(key, i)))
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

func hash(parts ...any) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprint(h, parts...)
	return h.Sum64()
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	switch {
	case errors.Is(err, store.ErrSessionBusy):
		return "busy"
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrStorageFull):
		return "store fault"
	}
	return "refused"
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
