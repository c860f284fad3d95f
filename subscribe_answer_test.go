package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// A park answered (on another instance) and followed by a commit of the
// run (on a third) between a run stream's reading of the steps and of the
// run's last step must not be reported as run_waiting positioned after
// that new step, which the stream would then skip for good (the chaos
// test's case: the guarded tool result after an approval answered
// elsewhere, with the stream still ending with run_finished).
func TestRunStreamParkAnsweredBetweenReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New()
	st := &parkDuringList{Store: mem}
	e, sid, rid := streamFixture(ctx, t, mem, st)
	step := func(kind steptype.Kind, status steptype.StepStatus) *steptype.Step {
		return &steptype.Step{ID: uuid.NewString(), SessionID: sid, RunID: rid, Kind: kind, Name: "llm", Status: status, Role: steptype.RoleUser, Content: "x", CreatedAt: time.Now()}
	}
	request := step(steptype.KindInput, steptype.StepWaiting)
	waiting, running, completed := steptype.RunWaiting, steptype.RunRunning, steptype.RunCompleted
	if _, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(steptype.KindUser, steptype.StepCompleted), request},
		Runs: []*store.RunUpdateParams{{ID: rid, Status: &waiting}}}); err != nil {
		t.Fatal(err)
	}
	// Right after the stream read the steps (1 and 2, the request): the
	// request is answered elsewhere, and the run resumes elsewhere and
	// commits its tool result (3). Both notifications arrive.
	st.park = func() {
		if _, err := mem.StepResolve(ctx, &store.StepResolveParams{ID: request.ID, RunID: rid, Status: steptype.StepCompleted,
			Content: "yes", Outputs: json.RawMessage(`true`), Now: time.Now(), QueueRun: true}); err != nil {
			t.Error(err)
		}
		e.exec.OnChange(store.ChangeRun(sid, rid, string(steptype.RunQueued)))
		if _, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(steptype.KindTool, steptype.StepCompleted)},
			Runs: []*store.RunUpdateParams{{ID: rid, Status: &running}}}); err != nil {
			t.Error(err)
		}
		e.exec.OnChange(store.ChangeStep(sid, 3))
	}
	var got []string
	steps := map[int64]int{}
	finishing := false
	for ev, err := range e.Subscribe(ctx, SubscribeParams{RunID: rid}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Type)+"@"+ev.Position.String())
		if ev.Type == EventStepCompleted {
			steps[ev.Step.Sequence]++
		}
		if !finishing && (ev.Type == EventRunWaiting || (ev.Type == EventStepCompleted && ev.Step.Sequence == 3)) {
			// The run finishes elsewhere.
			finishing = true
			if _, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(steptype.KindLLM, steptype.StepCompleted)},
				Runs: []*store.RunUpdateParams{{ID: rid, Status: &completed}}}); err != nil {
				t.Fatal(err)
			}
			e.exec.OnChange(store.ChangeRun(sid, rid, string(completed)))
		}
	}
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], string(EventRunFinished)+"@") {
		t.Fatalf("events %v: want run_finished last", got)
	}
	for seq := int64(1); seq <= 4; seq++ {
		if steps[seq] == 0 {
			t.Errorf("step %d never delivered; events %v", seq, got)
		}
	}
}

// An engine publishes its steps after their commit: a park's publication
// delayed past the answer and the next commit (made elsewhere) came after
// that step, and the stream delivered the parked request twice (found by
// the chaos test). An answer of an older request is still delivered.
func TestRunStreamLatePublication(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New()
	e, sid, rid := streamFixture(ctx, t, mem, mem)
	mk := func(seq int64, kind steptype.Kind, status steptype.StepStatus) *steptype.Step {
		return &steptype.Step{ID: uuid.NewString(), SessionID: sid, RunID: rid, Sequence: seq, Kind: kind, Name: "x", Status: status, Role: steptype.RoleUser, Content: "x", CreatedAt: time.Now()}
	}
	e.broker.Acquire(sid, 0)
	defer e.broker.Release(sid)
	tool, request, next := mk(1, steptype.KindTool, steptype.StepCompleted), mk(2, steptype.KindInput, steptype.StepWaiting), mk(3, steptype.KindTool, steptype.StepCompleted)
	answered := *request
	answered.Status = steptype.StepCompleted
	for _, s := range []*steptype.Step{next, tool, request, &answered} {
		if s == next {
			// The steps before it were delivered.
			e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: sid, RunID: rid, Step: tool})
			e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: sid, RunID: rid, Step: request})
		}
		e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: sid, RunID: rid, Step: s})
	}
	e.broker.Publish(&Event{Type: EventRunFinished, SessionID: sid, RunID: rid, Run: &steptype.Run{ID: rid, Status: steptype.RunCompleted}})
	var got []string
	for ev, err := range e.Subscribe(ctx, SubscribeParams{RunID: rid}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Step != nil {
			got = append(got, fmt.Sprintf("%d/%s", ev.Step.Sequence, ev.Step.Status))
		}
	}
	want := "[1/completed 2/waiting 3/completed 2/completed]"
	if fmt.Sprint(got) != want {
		t.Fatalf("steps %v, want %s", got, want)
	}
}

// A ring that positioned a step after an event (its topic had observed the
// step in the store before the executing engine published it) served it
// again to a client resuming from the step's own position, (N, 0) (found by
// the chaos test: a stream reconnected to another server got it twice).
func TestRunStreamResumeAtStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New()
	e, sid, rid := streamFixture(ctx, t, mem, mem)
	e.broker.Acquire(sid, 1)
	defer e.broker.Release(sid)
	step := &steptype.Step{ID: uuid.NewString(), SessionID: sid, RunID: rid, Sequence: 1, Kind: steptype.KindTool, Status: steptype.StepCompleted}
	e.broker.Publish(&Event{Type: EventStepStarted, SessionID: sid, RunID: rid})
	e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: sid, RunID: rid, Step: step})
	e.broker.Publish(&Event{Type: EventRunFinished, SessionID: sid, RunID: rid, Run: &steptype.Run{ID: rid, Status: steptype.RunCompleted}})
	var got []string
	for ev, err := range e.Subscribe(ctx, SubscribeParams{RunID: rid, After: Position{Seq: 1}}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Type)+"@"+ev.Position.String())
	}
	if want := "[step_started@1:1 run_finished@1:3]"; fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}
