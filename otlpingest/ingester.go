package otlpingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// ErrUnavailable wraps a store failure: the export was not recorded and
// should be retried (OTLP clients retry on 503).
var ErrUnavailable = errors.New("stepwise: otlp ingest unavailable")

// Owner is the lease owner of the runs the ingester creates; the lease
// never expires while the trace is open, so no executor claims them.
const Owner = "stepwise-otlp-ingest"

// Config configures an Ingester. Only Engine is required.
type Config struct {
	// Engine records the steps (Engine.Ingest) and owns the store.
	Engine *stepwise.Engine
	// LogWait is how long a model-call span whose message content comes as
	// log records (and has not arrived yet) is held before it is recorded
	// without it. Later spans of its trace wait with it, so that steps keep
	// their start-time order. Default 5s.
	LogWait time.Duration
	// Settle is how long the spans of a trace are held after the latest
	// export that brought some: exports sent concurrently arrive in any
	// order, and the spans of all of them are recorded together in
	// start-time order. 0 means the default (250ms); negative means no
	// wait at all (each export is recorded as it arrives, ParentWait
	// ignored).
	Settle time.Duration
	// ParentWait is how long a span whose parent span has not arrived is
	// held. A parent ends after its children, so a finished trace is
	// recorded at once in start-time order when its root arrives; the
	// spans of a trace still open are recorded after ParentWait. Default
	// 3s; negative means no wait.
	ParentWait time.Duration
	// TraceIdle finishes the run of a trace whose root span never arrived
	// after this long without new spans. Default 10 minutes.
	TraceIdle time.Duration
	// MaxPendingLogs bounds log records kept for spans not received yet;
	// beyond it records are rejected (partial success). Default 100000.
	MaxPendingLogs int
	// Logger receives background flush errors. Default slog.Default().
	Logger *slog.Logger
}

// Ingester maps OTLP exports to steps. It is safe for concurrent use.
type Ingester struct {
	cfg  Config
	eng  *stepwise.Engine
	st   store.Store
	mu   sync.Mutex
	tr   map[string]*traceState   // by trace id
	ss   map[string]*sessionState // by session id
	logs map[string]*pendingLogs  // by trace id + span id: records of spans not received yet
	nLog int

	lsMu sync.Mutex
	ls   map[string]*lsRun // LangSmith runs waiting for their end or their create, by run id

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// traceState is what the ingester knows of one trace.
type traceState struct {
	id        string
	sessionID string // resolved at the first flush
	runID     string
	runOpen   bool
	held      []*held
	heldByID  map[string]*held
	recorded  map[string]bool // span ids already turned into steps (or ignored)
	lastSeen  time.Time
	failed    bool
	// end is the latest end of the trace's recorded spans: when its run
	// finished.
	end time.Time
}

// held is a received span not recorded yet.
type held struct {
	s     *span
	u     *unit
	since time.Time
}

// sessionState remembers what a session already holds, so a re-sent span
// or history costs no store write.
type sessionState struct {
	seen  map[string]bool              // step ids appended
	calls map[string]steptype.ToolCall // tool calls of recorded llm steps, by id
	// unanswered are the ids of calls of recorded llm steps that no tool
	// step answers yet, oldest first: a tool span without a call id
	// answers the first of them with its tool's name.
	unanswered []string
	lastStep   string
	output     string // content of the latest llm step (the run's output)
	lastUse    time.Time
}

type pendingLogs struct {
	events []event
	since  time.Time
}

// New returns an ingester for cfg.Engine and starts its background loop
// (held spans, idle traces); Close stops it.
func New(cfg Config) (*Ingester, error) {
	if cfg.Engine == nil {
		return nil, errors.New("stepwise: otlp ingest: an engine is required")
	}
	if cfg.LogWait <= 0 {
		cfg.LogWait = 5 * time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 250 * time.Millisecond
	}
	if cfg.Settle < 0 {
		cfg.Settle, cfg.ParentWait = 0, -1
	}
	if cfg.ParentWait == 0 {
		cfg.ParentWait = 3 * time.Second
	}
	if cfg.ParentWait < 0 {
		cfg.ParentWait = 0
	}
	if cfg.TraceIdle <= 0 {
		cfg.TraceIdle = 10 * time.Minute
	}
	if cfg.MaxPendingLogs <= 0 {
		cfg.MaxPendingLogs = 100000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	in := &Ingester{cfg: cfg, eng: cfg.Engine, st: cfg.Engine.Store(), tr: map[string]*traceState{}, ss: map[string]*sessionState{},
		logs: map[string]*pendingLogs{}, ls: map[string]*lsRun{}, stop: make(chan struct{}), done: make(chan struct{})}
	go in.loop()
	return in, nil
}

// Close records every held span and stops the background loop.
func (in *Ingester) Close() {
	in.once.Do(func() {
		close(in.stop)
		<-in.done
		in.mu.Lock()
		defer in.mu.Unlock()
		for _, ts := range in.tr {
			if len(ts.held) > 0 {
				if err := in.flush(context.Background(), ts); err != nil {
					in.cfg.Logger.Error("stepwise: otlp ingest: flush on close", "trace", ts.id, "err", err)
				}
			}
		}
	})
}

// Result is the outcome of one export: how many items were rejected and
// why (the OTLP partial success).
type Result struct {
	Rejected int64
	Message  string
}

func (r *Result) reject(n int, msg string) {
	r.Rejected += int64(n)
	if r.Message == "" {
		r.Message = msg
	}
}

// ingestSpans records decoded spans.
func (in *Ingester) ingestSpans(ctx context.Context, spans []*span) error {
	units := make([]*unit, len(spans))
	for i, s := range spans {
		units[i] = classify(s) // outside the lock: the JSON work
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	var touched []*traceState
	for i, s := range spans {
		ts := in.trace(s.traceID, now)
		if ts.recorded[s.spanID] || ts.holds(s.spanID) {
			continue // a re-sent span
		}
		u := units[i]
		if pl := in.logs[s.traceID+s.spanID]; pl != nil {
			s.events = append(s.events, pl.events...)
			in.nLog -= len(pl.events)
			delete(in.logs, s.traceID+s.spanID)
			u = classify(s)
		}
		ts.hold(&held{s: s, u: u, since: now})
		touched = appendOnce(touched, ts)
	}
	if in.cfg.Settle > 0 {
		// Check each trace again just when it settles, not at the next
		// sweep tick.
		for _, ts := range touched {
			id := ts.id
			time.AfterFunc(in.cfg.Settle+time.Millisecond, func() { in.settled(id) })
		}
	}
	return in.flushReady(ctx, touched, now)
}

// ingestLogs attaches GenAI log records to their spans.
func (in *Ingester) ingestLogs(ctx context.Context, recs []*logRecord, res *Result) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	var touched []*traceState
	for _, r := range recs {
		ts := in.tr[r.traceID]
		if ts != nil && ts.recorded[r.spanID] {
			continue // its span is recorded already: documented as dropped
		}
		if ts != nil {
			if h := ts.find(r.spanID); h != nil {
				h.s.events = append(h.s.events, r.ev)
				h.u = classify(h.s)
				ts.lastSeen = now
				touched = appendOnce(touched, ts)
				continue
			}
		}
		if in.nLog >= in.cfg.MaxPendingLogs {
			res.reject(1, "too many log records waiting for their spans")
			continue
		}
		key := r.traceID + r.spanID
		pl := in.logs[key]
		if pl == nil {
			pl = &pendingLogs{since: now}
			in.logs[key] = pl
		}
		pl.events = append(pl.events, r.ev)
		in.nLog++
	}
	return in.flushReady(ctx, touched, now)
}

// flushReady records the held spans of each trace that has settled (no
// export for Settle) unless one of them still waits for its log records.
func (in *Ingester) flushReady(ctx context.Context, traces []*traceState, now time.Time) error {
	var errs []error
	for _, ts := range traces {
		if ts.sessionID == "" && len(ts.held) > 0 && now.Sub(ts.lastSeen) >= in.cfg.Settle {
			// A settled trace shows as a running run while its spans wait
			// for their parents.
			if err := in.open(ctx, ts, ts.held); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if !ts.ready(now, in.cfg) {
			continue
		}
		if err := in.flush(ctx, ts); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (in *Ingester) trace(id string, now time.Time) *traceState {
	ts := in.tr[id]
	if ts == nil {
		ts = &traceState{id: id, recorded: map[string]bool{}, heldByID: map[string]*held{}}
		in.tr[id] = ts
	}
	ts.lastSeen = now
	return ts
}

func (ts *traceState) holds(spanID string) bool { return ts.find(spanID) != nil }

func (ts *traceState) find(spanID string) *held { return ts.heldByID[spanID] }

func (ts *traceState) hold(h *held) {
	ts.held = append(ts.held, h)
	ts.heldByID[h.s.spanID] = h
}

// waiting reports whether a held span still expects its log records.
// ready reports whether the held spans of ts can be recorded: the trace
// has settled, every held span's parent has arrived (or waited long
// enough) and no span still waits for its log records. Spans are recorded
// together so that they keep their start-time order.
func (ts *traceState) ready(now time.Time, cfg Config) bool {
	if len(ts.held) == 0 || now.Sub(ts.lastSeen) < cfg.Settle || ts.waiting(now, cfg.LogWait) {
		return false
	}
	for _, h := range ts.held {
		p := h.s.parentID
		if p != "" && !ts.recorded[p] && ts.heldByID[p] == nil && now.Sub(h.since) < cfg.ParentWait {
			return false
		}
	}
	return true
}

func (ts *traceState) waiting(now time.Time, wait time.Duration) bool {
	for _, h := range ts.held {
		if h.u.awaitLogs && now.Sub(h.since) < wait {
			return true
		}
	}
	return false
}

func appendOnce(l []*traceState, ts *traceState) []*traceState {
	for _, x := range l {
		if x == ts {
			return l
		}
	}
	return append(l, ts)
}

// loop records spans held past LogWait and finishes idle traces.
func (in *Ingester) loop() {
	defer close(in.done)
	every := in.cfg.LogWait / 4
	if in.cfg.ParentWait > 0 && in.cfg.ParentWait/4 < every {
		every = in.cfg.ParentWait / 4
	}
	if in.cfg.Settle > 0 && in.cfg.Settle/2 < every {
		every = in.cfg.Settle / 2
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-in.stop:
			return
		case <-tick.C:
			in.sweep(time.Now())
			in.sweepRuns(context.Background(), time.Now())
		}
	}
}

// settled records the trace id if it is ready.
func (in *Ingester) settled(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-in.stop:
		return // closed: Close records what is held
	default:
	}
	if ts := in.tr[id]; ts != nil {
		if err := in.flushReady(context.Background(), []*traceState{ts}, time.Now()); err != nil {
			in.cfg.Logger.Error("stepwise: otlp ingest: flush", "trace", id, "err", err)
		}
	}
}

// sweep flushes traces whose held spans waited long enough, finishes runs
// of idle traces and forgets old state.
func (in *Ingester) sweep(now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	ctx := context.Background()
	for id, ts := range in.tr {
		if err := in.flushReady(ctx, []*traceState{ts}, now); err != nil {
			in.cfg.Logger.Error("stepwise: otlp ingest: flush", "trace", id, "err", err)
		}
		if len(ts.held) == 0 && now.Sub(ts.lastSeen) > in.cfg.TraceIdle {
			if ts.runOpen {
				if err := in.finishRun(ctx, ts, steptype.RunCompleted); err != nil {
					in.cfg.Logger.Error("stepwise: otlp ingest: finish idle trace", "trace", id, "err", err)
				}
			}
			delete(in.tr, id)
		}
	}
	for k, pl := range in.logs {
		if now.Sub(pl.since) > in.cfg.TraceIdle {
			in.nLog -= len(pl.events)
			delete(in.logs, k)
		}
	}
	for id, ss := range in.ss {
		if now.Sub(ss.lastUse) > in.cfg.TraceIdle {
			delete(in.ss, id)
		}
	}
}

// flush records the held spans of ts in start-time order.
func (in *Ingester) flush(ctx context.Context, ts *traceState) error {
	hs := ts.held
	ts.held = nil
	clear(ts.heldByID)
	sortSpans(hs)
	if ts.sessionID == "" {
		if err := in.open(ctx, ts, hs); err != nil {
			for _, h := range hs {
				ts.hold(h)
			}
			return err
		}
	}
	ss := in.session(ts.sessionID)
	var steps []*stepwise.Step
	root := false
	for _, h := range hs {
		ts.recorded[h.s.spanID] = true
		if e := h.s.finished(); e.After(ts.end) {
			ts.end = e
		}
		if h.s.parentID == "" {
			root = true
			ts.failed = ts.failed || h.s.failed
		}
		steps = append(steps, in.stepsOf(ts, ss, h)...)
	}
	var runs []*store.RunUpdateParams
	if ts.runOpen && (len(steps) > 0 || root) {
		u := &store.RunUpdateParams{ID: ts.runID, StepDelta: int64(len(steps))}
		if root {
			st := steptype.RunCompleted
			if ts.failed {
				st = steptype.RunFailed
			}
			out := ss.output
			u.Status, u.Output, u.ClearLease, u.Now = &st, &out, true, ts.end
		}
		runs = append(runs, u)
	}
	if len(steps) == 0 && len(runs) == 0 {
		return nil
	}
	if len(steps) == 0 {
		if _, err := in.st.RunUpdate(ctx, runs[0]); err != nil {
			return fmt.Errorf("%w: finish run: %w", ErrUnavailable, err)
		}
	} else if _, err := in.eng.Ingest(ctx, stepwise.IngestParams{SessionID: ts.sessionID, Steps: steps, Runs: runs}); err != nil {
		for _, s := range steps {
			delete(ss.seen, s.ID)
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if root {
		ts.runOpen = false
	}
	return nil
}

func (in *Ingester) session(id string) *sessionState {
	ss := in.ss[id]
	if ss == nil {
		ss = &sessionState{seen: map[string]bool{}, calls: map[string]steptype.ToolCall{}}
		in.ss[id] = ss
	}
	ss.lastUse = time.Now()
	return ss
}

// finishRun ends the run of a trace whose root never arrived.
func (in *Ingester) finishRun(ctx context.Context, ts *traceState, st steptype.RunStatus) error {
	out := ""
	if ss := in.ss[ts.sessionID]; ss != nil {
		out = ss.output
	}
	_, err := in.st.RunUpdate(ctx, &store.RunUpdateParams{ID: ts.runID, Status: &st, Output: &out, ClearLease: true,
		ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Now: ts.end})
	ts.runOpen = false
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}
