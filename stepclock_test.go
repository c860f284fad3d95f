package stepwise

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/store/memory"
)

// TestStepClockReads counts the clock readings of the scripted tool loop
// (an llm step and a tool step per iteration) with the engine's default
// clock: the step's start, its id and its timeout's start are one reading,
// and so are a commit's time and the id of the step it assigns one to, and
// the model's first token and its delta's event. The step timeout's checks
// read only the monotonic clock (time.Until) and are not counted here.
func TestStepClockReads(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("counts only")
	}
	e, r := startEchoLoop(t, "clock", 200)
	var reads atomic.Int64
	counted := func() time.Time { reads.Add(1); return time.Now() }
	e.cfg.Now = counted // procClock stays set: the engine was made with the default clock
	reads.Store(0)
	steps := executeCountingSteps(t, e, r.ID)
	per := float64(reads.Load()) / float64(steps)
	t.Logf("%d steps: %.2f clock readings per step", steps, per)
	// Per iteration: the llm step's start, the model call's start, its
	// first token, its finish and its commit; the tool step's start, the
	// tool call's start, its result and the commit (9 for 2 steps, and
	// the run's own; 13 when each recorded time read its own).
	if per > 4.6 {
		t.Errorf("%.2f clock readings per step, want at most 4.6", per)
	}
}

// TestStepDeadlineCountsFromItsStart checks that a step's timeout counts
// from the reading of its start (one reading of the clock for both), and
// from the process clock when the engine has a clock of the caller's.
func TestStepDeadlineCountsFromItsStart(t *testing.T) {
	t.Parallel()
	const timeout = 7 * time.Minute
	for _, fixed := range []bool{false, true} {
		var started, deadline time.Time
		var hasDeadline bool
		a := &Agent{Name: "a", StartStep: "a", Limits: Limits{StepTimeout: timeout},
			Steps: map[string]Handler{"a": StepFunc(func(ctx context.Context, s *Scope) (*Next, error) {
				started = s.step.Metrics.StartedAt
				deadline, hasDeadline = ctx.Deadline()
				return &Next{Step: StepEnd}, nil
			})}}
		cfg := Config{Store: memory.New(), Agents: []*Agent{a}}
		t0 := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
		if fixed {
			cfg.Now = func() time.Time { return t0 }
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		if _, err := e.Wait(t.Context(), e.Run(t.Context(), StartParams{Agent: "a", Input: "go"})); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		e.Close()
		if !hasDeadline {
			t.Fatal("no deadline")
		}
		if fixed {
			if !started.Equal(t0) || deadline.Before(before.Add(timeout)) || deadline.After(after.Add(timeout)) {
				t.Errorf("fixed clock: started %v, deadline %v, want %v and within [%v, %v]", started, deadline, t0, before.Add(timeout), after.Add(timeout))
			}
			continue
		}
		if got := deadline.Sub(started); got != timeout {
			t.Errorf("deadline %v after the step's start, want %v", got, timeout)
		}
	}
}

// TestStepDeadlineAfterAHeldBackStart checks that a step whose
// step_started event waited for a slow inline consumer (the sink full)
// counts its timeout from after the wait, not from the start it read
// before: the consumer's pace is not the step's time.
func TestStepDeadlineAfterAHeldBackStart(t *testing.T) {
	t.Parallel()
	const timeout, hold = 7 * time.Minute, 150 * time.Millisecond
	var started, deadline time.Time
	// The sink holds 256 events, and the consumer holds run_started: the
	// input step's step_completed, fill's step_started and 253 deltas leave
	// room for fill's step_completed only, and b's step_started waits.
	const deltas = 253
	a := &Agent{Name: "a", StartStep: "fill", Limits: Limits{StepTimeout: timeout},
		Steps: map[string]Handler{
			"fill": StepFunc(func(ctx context.Context, s *Scope) (*Next, error) {
				for range deltas {
					s.Emit("x")
				}
				return &Next{Step: "b"}, nil
			}),
			"b": StepFunc(func(ctx context.Context, s *Scope) (*Next, error) {
				started = s.step.Metrics.StartedAt
				deadline, _ = ctx.Deadline()
				return &Next{Step: StepEnd}, nil
			}),
		}}
	e, err := New(Config{Store: memory.New(), Agents: []*Agent{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.StartRun(t.Context(), StartParams{Agent: "a", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	first := true
	for ev, err := range e.Execute(t.Context(), r.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if first {
			time.Sleep(hold) // the loop fills the sink meanwhile
			first = false
		}
		if ev.Type != EventStepDelta {
			types = append(types, string(ev.Type)+":"+ev.StepName)
		}
	}
	if got := deadline.Sub(started); got < timeout+hold/2 {
		t.Errorf("deadline %v after the step's start, want at least %v (the consumer held the start for %v); events %s",
			got, timeout+hold/2, hold, strings.Join(types, " "))
	}
}
