package observe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// ErrNoStore is returned by the constructors of this package when their
// configuration names no store.
var ErrNoStore = errors.New("stepwise: observe: Store is required")

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Store keeps the events. Required.
	Store store.Store
	// Mask, when set, is applied to every string of an event payload and to
	// event errors, after secrets were redacted; e.g. (*Masker).Text.
	Mask func(string) string
	// MaxPayload bounds one payload; a larger one is replaced by a marker
	// with its size. Default 16 MiB. Payloads over store.InlinePayloadLimit
	// (64 KiB) are stored out of line by the store.
	MaxPayload int
	// MaxPending bounds the events kept per run while their step has not
	// committed; older ones are dropped beyond it. Default 1000.
	MaxPending int
	// Logger receives write errors. Default slog.Default().
	Logger *slog.Logger
	// Agent, when set, says whether the events of an agent's runs are kept;
	// the events of the others are dropped when their step commits.
	// Default: every agent's.
	Agent func(agent string) bool
}

// Recorder persists the events inside steps — provider requests and
// responses, tool invocations, HTTP exchanges, sub-calls — with secrets
// redacted. It is a stepwise.Observer and a stepwise.StepEventObserver:
// register it with e.Observe(rec). Events arrive before their step
// commits; the recorder keeps them until the step does, then writes them
// under the step's id. Events of a step that never commits (a crash, a
// cancelled attempt) are dropped when the run finishes; the events of a
// failed attempt go to its error step.
type Recorder struct {
	cfg RecorderConfig
	obs store.ObservationStore

	mu   sync.Mutex
	runs map[string]*runEvents
}

// runEvents are the pending events of one run and the steps it committed.
type runEvents struct {
	pending   []*stepwise.StepEvent
	committed map[string]string // StepID or "call:"+ToolCallID → committed step id
}

// NewRecorder returns a Recorder.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if cfg.Store == nil {
		return nil, ErrNoStore
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = 16 << 20
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Recorder{cfg: cfg, obs: cfg.Store, runs: map[string]*runEvents{}}, nil
}

var (
	_ stepwise.Observer          = (*Recorder)(nil)
	_ stepwise.StepEventObserver = (*Recorder)(nil)
)

// maxRuns bounds the runs tracked at once: runs that park and are never
// resumed would otherwise stay forever.
const maxRuns = 10000

func (r *Recorder) run(id string) *runEvents {
	re := r.runs[id]
	if re == nil {
		if len(r.runs) >= maxRuns {
			for k, v := range r.runs {
				if len(v.pending) == 0 {
					delete(r.runs, k)
				}
			}
		}
		re = &runEvents{committed: map[string]string{}}
		r.runs[id] = re
	}
	return re
}

// StepEvent implements stepwise.StepEventObserver.
func (r *Recorder) StepEvent(ctx context.Context, ev *stepwise.StepEvent) {
	r.mu.Lock()
	re := r.run(ev.RunID)
	stepID := re.committed[eventKey(ev)]
	if stepID == "" {
		if len(re.pending) >= r.cfg.MaxPending {
			re.pending = re.pending[1:]
		}
		re.pending = append(re.pending, ev)
	}
	r.mu.Unlock()
	if stepID != "" { // a late event of a committed step
		r.write(ctx, stepID, []*stepwise.StepEvent{ev})
	}
}

func eventKey(ev *stepwise.StepEvent) string {
	if ev.ToolCallID != "" {
		return "call:" + ev.ToolCallID
	}
	return ev.StepID
}

// StepCommitted implements stepwise.Observer: the pending events of s are
// written under its id.
func (r *Recorder) StepCommitted(ctx context.Context, run *stepwise.Run, s *stepwise.Step) {
	r.mu.Lock()
	re := r.runs[s.RunID]
	var mine []*stepwise.StepEvent
	if re != nil {
		keep := re.pending[:0]
		for _, ev := range re.pending {
			if belongs(ev, s) {
				mine = append(mine, ev)
			} else {
				keep = append(keep, ev)
			}
		}
		clear(re.pending[len(keep):])
		re.pending = keep
		if len(re.committed) > 4*r.cfg.MaxPending {
			clear(re.committed)
		}
		re.committed[s.ID] = s.ID
		if s.ToolCallID != "" && s.Kind != steptype.KindError {
			re.committed["call:"+s.ToolCallID] = s.ID
		}
	}
	r.mu.Unlock()
	if len(mine) > 0 && (r.cfg.Agent == nil || run == nil || r.cfg.Agent(run.Agent)) {
		r.write(ctx, s.ID, mine)
	}
}

// belongs reports whether ev happened inside step s: the step it was
// recorded for, the tool call the step answers, or the failed attempt an
// error step records.
func belongs(ev *stepwise.StepEvent, s *stepwise.Step) bool {
	switch {
	case ev.StepID != "" && ev.StepID == s.ID:
		return true
	case s.Kind == steptype.KindError && ev.Attempt == s.Metrics.Attempt:
		if ev.ToolCallID != "" {
			return ev.ToolCallID == toolCallOf(s)
		}
		return ev.StepName == s.Name
	case ev.ToolCallID != "" && ev.ToolCallID == s.ToolCallID:
		return true
	}
	return false
}

// toolCallOf returns the tool call a tool error step records.
func toolCallOf(s *stepwise.Step) string {
	var in struct {
		ID string `json:"tool_call_id"`
	}
	if s.ToolName == "" || json.Unmarshal(s.Inputs, &in) != nil {
		return ""
	}
	return in.ID
}

// RunFinished implements stepwise.Observer: events whose step never
// committed are dropped.
func (r *Recorder) RunFinished(_ context.Context, run *stepwise.Run) {
	r.mu.Lock()
	re := r.runs[run.ID]
	delete(r.runs, run.ID)
	r.mu.Unlock()
	if re != nil && len(re.pending) > 0 {
		r.cfg.Logger.Debug("stepwise: step events without a committed step dropped", "run", run.ID, "events", len(re.pending))
	}
}

// write stores events of a committed step.
func (r *Recorder) write(ctx context.Context, stepID string, evs []*stepwise.StepEvent) {
	rows := make([]*store.StepEvent, len(evs))
	for i, ev := range evs {
		rows[i] = &store.StepEvent{
			ID: stepwise.NewID(), StepID: stepID, Type: ev.Type, Name: ev.Name, Attempt: ev.Attempt,
			StartedAt: ev.Time, Duration: ev.Duration, Error: r.text(ev.Error), Payload: r.payload(ev.Payload),
		}
	}
	if _, err := r.obs.StepEventAppend(ctx, &store.StepEventAppendParams{Events: rows}); err != nil {
		r.cfg.Logger.Error("stepwise: record step events", "step", stepID, "err", err)
	}
}

func (r *Recorder) text(s string) string {
	s = RedactText(s)
	if r.cfg.Mask != nil {
		s = r.cfg.Mask(s)
	}
	return s
}

// payload marshals, redacts and masks an event payload.
func (r *Recorder) payload(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": "payload is not JSON: " + err.Error()})
	}
	if string(b) == "null" {
		return nil
	}
	b = rewriteJSON(b, func(key, s string) string {
		if secretName(key) {
			return Redacted
		}
		return r.text(s)
	})
	if len(b) > r.cfg.MaxPayload {
		b, _ = json.Marshal(map[string]any{"truncated": true, "size": len(b)})
	}
	return b
}
