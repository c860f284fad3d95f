package broker

import (
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
)

// An execution that resumes a run acquires the session at the run's last
// committed step, which another instance may have committed without this
// broker hearing of it (a lost or late notification). Its subscribers behind
// that step go to the store first: else the execution's first event,
// positioned after the step, made them skip the steps in between (found by
// internal/sim, seed 897: a run stream missed the two steps before the
// park that another engine committed).
func TestAcquirePastSubscribersSendsThemToTheStore(t *testing.T) {
	t.Parallel()
	b := New()
	b.Publish(&steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 12}})
	sub, _, _ := b.Subscribe("s", "", steptype.Position{Seq: 12}, nil)
	topic := b.Acquire("s", 14) // steps 13 and 14 committed elsewhere
	defer b.Release("s")
	b.PublishTo(topic, &steptype.Event{Type: steptype.EventRunStarted, SessionID: "s"})
	if !sub.Lagged() {
		t.Fatalf("the subscriber at step 12 was given %+v, not sent to the store for steps 13 and 14", sub.Take(nil))
	}
	// One already at the acquired step is not disturbed.
	b2 := New()
	b2.Publish(&steptype.Event{Type: steptype.EventStepCompleted, SessionID: "s", Step: &steptype.Step{Sequence: 14}})
	sub2, _, _ := b2.Subscribe("s", "", steptype.Position{Seq: 14}, nil)
	topic2 := b2.Acquire("s", 14)
	defer b2.Release("s")
	b2.PublishTo(topic2, &steptype.Event{Type: steptype.EventRunStarted, SessionID: "s"})
	if sub2.Lagged() {
		t.Fatal("a subscriber at the acquired step was sent to the store")
	}
	if got := sub2.Take(nil); len(got) != 1 || got[0].Position != (steptype.Position{Seq: 14, Idx: 1}) {
		t.Fatalf("got %+v, want run_started at 14:1", got)
	}
}
