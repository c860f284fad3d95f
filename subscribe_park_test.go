package stepwise

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// parkDuringList is a store whose first session step listing lets another
// "instance" park the run right after the listing read the steps.
type parkDuringList struct {
	store.Store
	once sync.Once
	park func()
}

func (s *parkDuringList) StepList(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	steps, err := s.Store.StepList(ctx, p)
	if p.SessionID != "" && s.park != nil {
		s.once.Do(s.park)
	}
	return steps, err
}

// A run parked by another instance between a run stream's reading of the
// steps and of the run's status must not be reported as run_waiting past
// its input request, which the stream would then never deliver (the chaos
// test's case: a client waiting for the request would never see it).
func TestRunStreamParkBetweenReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New()
	st := &parkDuringList{Store: mem}
	e, sid, rid := streamFixture(ctx, t, mem, st)
	step := func(kind steptype.Kind, status steptype.StepStatus) *steptype.Step {
		return &steptype.Step{ID: uuid.NewString(), SessionID: sid, RunID: rid, Kind: kind, Name: "llm", Status: status, Role: steptype.RoleUser, Content: "x", CreatedAt: time.Now()}
	}
	if _, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(steptype.KindUser, steptype.StepCompleted)}}); err != nil {
		t.Fatal(err)
	}
	request := step(steptype.KindInput, steptype.StepWaiting)
	waiting := steptype.RunWaiting
	st.park = func() {
		if _, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{request},
			Runs: []*store.RunUpdateParams{{ID: rid, Status: &waiting}}}); err != nil {
			t.Error(err)
		}
		e.exec.OnChange(store.ChangeRun(sid, rid, string(waiting)))
	}
	var got []string
	for ev, err := range e.Subscribe(ctx, SubscribeParams{RunID: rid}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Type)+"@"+ev.Position.String())
		if ev.Type == EventRunWaiting {
			break
		}
	}
	want := []string{"step_completed@1:0", "step_completed@2:0", "run_waiting@2:1"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// A local park is committed before its steps are published to the ring: a
// run stream catching up in between (it fell behind) saw the run waiting,
// read nothing from the store since the ring covered its position, and
// reported run_waiting past the request it never delivered (found by the
// chaos test).
func TestRunStreamParkBeforePublish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New()
	e, sid, rid := streamFixture(ctx, t, mem, mem)
	step := func(kind steptype.Kind, status steptype.StepStatus) *steptype.Step {
		return &steptype.Step{ID: uuid.NewString(), SessionID: sid, RunID: rid, Kind: kind, Name: "llm", Status: status, Role: steptype.RoleUser, Content: "x", CreatedAt: time.Now()}
	}
	first, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(steptype.KindUser, steptype.StepCompleted)}})
	if err != nil {
		t.Fatal(err)
	}
	// The execution publishes into the topic: the ring covers what follows.
	e.broker.Acquire(sid, 1)
	defer e.broker.Release(sid)
	e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: sid, RunID: rid, Step: first[0]})
	waiting := steptype.RunWaiting
	var got []string
	for ev, err := range e.Subscribe(ctx, SubscribeParams{RunID: rid}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Type)+"@"+ev.Position.String())
		if ev.Type == EventRunWaiting {
			break
		}
		if len(got) == 1 {
			// The park commits; its publication has not happened yet when
			// the subscriber falls behind and catches up.
			if _, err := mem.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step(steptype.KindInput, steptype.StepWaiting)},
				Runs: []*store.RunUpdateParams{{ID: rid, Status: &waiting}}}); err != nil {
				t.Fatal(err)
			}
			for _, s := range e.broker.Subscribers(sid) {
				s.MarkLagged()
			}
		}
	}
	want := []string{"step_completed@1:0", "step_completed@2:0", "run_waiting@2:1"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// streamFixture returns an engine on st (mem, or a store wrapping it) and a
// running run of a new session created in mem.
func streamFixture(ctx context.Context, t *testing.T, mem *memory.Store, st store.Store) (e *Engine, sid, rid string) {
	t.Helper()
	e, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	sid, rid = uuid.NewString(), uuid.NewString()
	if _, err := mem.SessionCreate(ctx, &store.SessionCreateParams{ID: sid, Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: rid, SessionID: sid, Agent: "a", Status: steptype.RunRunning}}); err != nil {
		t.Fatal(err)
	}
	return e, sid, rid
}
