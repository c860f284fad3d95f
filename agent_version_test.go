package stepwise_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// reviewAgent parks at "draft" with an input request and continues at
// review (named reviewStep) once answered.
func reviewAgent(instructions, reviewStep string, mode stepwise.UpdateMode, stepMap map[string]string) *stepwise.Agent {
	return &stepwise.Agent{
		Name: "reviewer", Instructions: instructions, StartStep: "draft", OnUpdate: mode, StepMap: stepMap,
		Steps: map[string]stepwise.Handler{
			"draft": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
				return &stepwise.Next{Step: reviewStep, Output: "draft 1", Input: &stepwise.InputRequest{Prompt: "approve the draft?"}}, nil
			}),
			reviewStep: stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
				return &stepwise.Next{Step: stepwise.StepEnd, Output: s.Agent().Instructions + " reviewed at " + s.StepName()}, nil
			}),
		},
	}
}

// parked starts a run of a on a fresh engine over st and returns it once it
// waits for input; the engine is closed (a process that stopped).
func parked(t *testing.T, st store.Store, a *stepwise.Agent) *stepwise.Run {
	t.Helper()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: a.Name, Input: "write it"}))
	if err != nil || run.Status != steptype.RunWaiting {
		t.Fatalf("%v %+v", err, run)
	}
	return run
}

func versionOf(t *testing.T, r *stepwise.Run) string {
	t.Helper()
	var o struct {
		V string `json:"agent_version"`
	}
	_ = json.Unmarshal(r.Options, &o)
	return o.V
}

// restarted returns an engine with a over st, started.
func restarted(t *testing.T, st store.Store, a *stepwise.Agent) *stepwise.Engine {
	t.Helper()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{a}, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func waitRun(t *testing.T, st store.Store, id string, want steptype.RunStatus) *stepwise.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := st.RunGet(context.Background(), &store.RunGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s (%+v)", id, r.Status, want, r.Error)
		}
		time.Sleep(5 * time.Millisecond) // polling the store for a status another goroutine sets
	}
}

func answerPending(t *testing.T, e *stepwise.Engine, runID string) {
	t.Helper()
	ctx := context.Background()
	pend, err := e.Pending(ctx, runID)
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %d", err, len(pend))
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: runID, RequestID: pend[0].Step.ID, Answer: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
}

func TestRunRecordsAgentVersion(t *testing.T) {
	t.Parallel()
	st := memory.New()
	v1 := reviewAgent("v1", "review", "", nil)
	r := parked(t, st, v1)
	e := restarted(t, st, reviewAgent("v1", "review", "", nil))
	a, _ := e.Agent("reviewer")
	if versionOf(t, r) == "" || versionOf(t, r) != a.Version {
		t.Fatalf("run version %q, agent version %q", versionOf(t, r), a.Version)
	}
	if b := reviewAgent("v2", "review", "", nil); mustVersion(t, b) == a.Version {
		t.Fatal("changed instructions keep the version")
	}
}

func mustVersion(t *testing.T, a *stepwise.Agent) string {
	e, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, _ := e.Agent(a.Name)
	return got.Version
}

func TestAgentUpdateContinueMapsRenamedStep(t *testing.T) {
	t.Parallel()
	st := memory.New()
	r := parked(t, st, reviewAgent("v1", "review", "", nil))
	e := restarted(t, st, reviewAgent("v2", "check", stepwise.UpdateContinue, map[string]string{"review": "check"}))
	answerPending(t, e, r.ID)
	done := waitRun(t, st, r.ID, steptype.RunCompleted)
	a, _ := e.Agent("reviewer")
	if versionOf(t, done) != a.Version || versionOf(t, done) == versionOf(t, r) {
		t.Fatalf("version after continue %q (agent %q, was %q)", versionOf(t, done), a.Version, versionOf(t, r))
	}
	ss := steps(t, st, r.SessionID)
	if last := ss[len(ss)-1]; last.Name != "check" || !strings.Contains(string(last.Outputs), "v2 reviewed at check") {
		t.Fatalf("last step %s %s", last.Name, last.Outputs)
	}
}

func TestAgentUpdateUnmappedStepFailsClearly(t *testing.T) {
	t.Parallel()
	st := memory.New()
	r := parked(t, st, reviewAgent("v1", "review", "", nil))
	e := restarted(t, st, reviewAgent("v2", "check", stepwise.UpdateContinue, nil))
	answerPending(t, e, r.ID)
	done := waitRun(t, st, r.ID, steptype.RunFailed)
	if done.Error == nil || done.Error.Code != "unknown_step" || !strings.Contains(done.Error.Message, `step "review" is not defined in agent "reviewer"`) ||
		!strings.Contains(done.Error.Message, "step_map") {
		t.Fatalf("error %+v", done.Error)
	}
}

func TestAgentUpdateFailsParkedRun(t *testing.T) {
	t.Parallel()
	st := memory.New()
	r := parked(t, st, reviewAgent("v1", "review", "", nil))
	restarted(t, st, reviewAgent("v2", "review", stepwise.UpdateFail, nil))
	done := waitRun(t, st, r.ID, steptype.RunFailed)
	if done.Error == nil || done.Error.Code != "agent_updated" || !strings.Contains(done.Error.Message, "changed from version "+versionOf(t, r)) {
		t.Fatalf("error %+v", done.Error)
	}
	// Its request was closed with it.
	pend, _ := st.StepList(context.Background(), &store.StepListParams{RunID: r.ID, Status: steptype.StepWaiting})
	if len(pend) != 0 {
		t.Fatalf("%d requests still waiting", len(pend))
	}
}

func TestAgentUpdateRestartsInFork(t *testing.T) {
	t.Parallel()
	st := memory.New()
	r := parked(t, st, reviewAgent("v1", "review", "", nil))
	e := restarted(t, st, reviewAgent("v2", "review", stepwise.UpdateRestart, nil))
	old := waitRun(t, st, r.ID, steptype.RunCancelled)
	if old.Error == nil || old.Error.Code != "agent_updated" || !strings.Contains(old.Error.Message, "restarted as run") {
		t.Fatalf("old run error %+v", old.Error)
	}
	// The reason names the new run; it runs the new definition from the
	// start with the same input, in another session (a fork before the
	// run's first step; the run's first step is the session's first, so
	// the fork is empty).
	id := old.Error.Message[strings.Index(old.Error.Message, "restarted as run ")+len("restarted as run "):]
	id = id[:strings.Index(id, " ")]
	nr0, err := st.RunGet(context.Background(), &store.RunGetParams{ID: id})
	if err != nil || nr0.Input != "write it" || nr0.SessionID == r.SessionID {
		t.Fatalf("new run %+v %v", nr0, err)
	}
	runs := []*stepwise.Run{nr0}
	nr := waitRun(t, st, runs[0].ID, steptype.RunWaiting) // the new definition parks at its own request
	a, _ := e.Agent("reviewer")
	if versionOf(t, nr) != a.Version {
		t.Fatalf("restarted run version %q, want %q", versionOf(t, nr), a.Version)
	}
}

func TestAgentUpdateFailsQueuedRun(t *testing.T) {
	t.Parallel()
	st := memory.New()
	e1, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{reviewAgent("v1", "review", "", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e1.StartRun(context.Background(), stepwise.StartParams{Agent: "reviewer", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_ = e1.Close()
	restarted(t, st, reviewAgent("v2", "review", stepwise.UpdateFail, nil))
	done := waitRun(t, st, r.ID, steptype.RunFailed)
	if done.Error == nil || done.Error.Code != "agent_updated" {
		t.Fatalf("error %+v", done.Error)
	}
}

func TestAgentUpdateModeValidated(t *testing.T) {
	t.Parallel()
	_, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{reviewAgent("v", "review", "sometimes", map[string]string{"a": "nope"})}})
	if err == nil || !strings.Contains(err.Error(), `on_update "sometimes"`) || !strings.Contains(err.Error(), `"a" maps to "nope"`) {
		t.Fatalf("err %v", err)
	}
}

func TestAgentUpdateRestartsSecondTurnInFork(t *testing.T) {
	t.Parallel()
	st := memory.New()
	ctx := context.Background()
	e1, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{reviewAgent("v1", "review", "", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := e1.Wait(ctx, e1.Run(ctx, stepwise.StartParams{Agent: "reviewer", Input: "turn one"}))
	answerPending(t, e1, first.ID)
	if r, err := e1.Wait(ctx, e1.Resume(ctx, first.ID)); err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("first turn %v %+v", err, r)
	}
	second, _ := e1.Wait(ctx, e1.Run(ctx, stepwise.StartParams{Agent: "reviewer", SessionID: first.SessionID, Input: "turn two"}))
	if second.Status != steptype.RunWaiting {
		t.Fatalf("second turn %s", second.Status)
	}
	_ = e1.Close()
	firstOfSecond := steps(t, st, first.SessionID)
	var userSeq int64
	for _, s := range firstOfSecond {
		if s.RunID == second.ID && s.Kind == steptype.KindUser {
			userSeq = s.Sequence
		}
	}
	e := restarted(t, st, reviewAgent("v2", "review", stepwise.UpdateRestart, nil))
	waitRun(t, st, second.ID, steptype.RunCancelled)
	// The old run is settled first (one conditional update wins), then the
	// restart is created: wait for the fork.
	var forks []*stepwise.Session
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		forks, err = e.Forks(ctx, first.SessionID)
		if err != nil || len(forks) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(forks) != 1 || forks[0].ForkSequence != userSeq-1 {
		t.Fatalf("forks %v %+v (user step of the turn at %d)", err, forks, userSeq)
	}
	runs, _ := st.RunList(ctx, &store.RunListParams{SessionID: forks[0].ID})
	if len(runs) != 1 || runs[0].Input != "turn two" {
		t.Fatalf("fork runs %+v", runs)
	}
	waitRun(t, st, runs[0].ID, steptype.RunWaiting)
	// The fork holds the first turn, then the new attempt of the second.
	if got := steps(t, st, forks[0].ID); got[userSeq-2].RunID != first.ID || got[userSeq-1].Content != "turn two" || got[userSeq-1].RunID != runs[0].ID {
		t.Fatalf("fork steps around %d: %+v", userSeq, got)
	}
}
