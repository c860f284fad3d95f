package stepwise

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// deliveryStore checks, at every write, that the inline consumer has
// received the step_completed event of every step committed before: a
// step_completed event the execution holds back (publishHeld) must reach
// the consumer before anything that takes time, a store write included.
type deliveryStore struct {
	store.Store
	committed atomic.Int64 // steps committed
	seen      atomic.Int64 // step_completed events the consumer received
	late      atomic.Int64 // writes that waited in vain
}

func (d *deliveryStore) wait() {
	if d.late.Load() > 0 {
		return
	}
	deadline := time.Now().Add(3 * time.Second)
	for d.seen.Load() < d.committed.Load() {
		if time.Now().After(deadline) {
			d.late.Add(1)
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func (d *deliveryStore) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*steptype.Step, error) {
	d.wait()
	out, err := d.Store.StepAppend(ctx, p)
	if err == nil {
		d.committed.Add(int64(len(out)))
	}
	return out, err
}

func (d *deliveryStore) RunUpdate(ctx context.Context, p *store.RunUpdateParams) (*steptype.Run, error) {
	d.wait()
	return d.Store.RunUpdate(ctx, p)
}

// TestHeldEventsReachTheConsumer runs the tool loop to its end (a
// run_finished after a store write) and into its step budget (an error step
// committed after the last step): every step_completed event reaches the
// inline consumer before the next store write, and the consumer gets every
// event once, in the order they were published.
func TestHeldEventsReachTheConsumer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxSteps int
		status   steptype.RunStatus
	}{
		{"finish", 100, steptype.RunCompleted},
		{"step budget", 6, steptype.RunFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type args struct {
				N int `json:"n"`
			}
			echo := tool.New("echo", "echo", func(ctx context.Context, a args) (int, error) { return a.N, nil })
			agent := &Agent{Name: "held", Model: scripted.Loop("echo", `{"n":1}`, 5, "done"), Tools: []tool.Tool{echo},
				Limits: Limits{MaxSteps: tc.maxSteps}}
			st := &deliveryStore{Store: memory.New()}
			e, err := New(Config{Store: st, Agents: []*Agent{agent}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r, err := e.StartRun(t.Context(), StartParams{Agent: "held", Input: "go"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var final *Run
			for ev, err := range e.Execute(t.Context(), r.ID) {
				if err != nil {
					t.Fatal(err)
				}
				name := string(ev.Type)
				if ev.Type == EventStepCompleted {
					st.seen.Add(1)
					name += ":" + string(ev.Step.Kind)
				}
				if ev.Run != nil {
					final = ev.Run
				}
				got = append(got, name)
			}
			if n := st.late.Load(); n > 0 {
				t.Errorf("a store write came before the consumer had a committed step's step_completed event")
			}
			if final == nil || final.Status != tc.status {
				t.Fatalf("run ended %v, want %s", final, tc.status)
			}
			// The expected sequence: input, then llm and tool steps.
			want := []string{"run_started", "step_completed:user"}
			steps := 1
			for i := 0; ; i++ {
				if steps >= tc.maxSteps {
					want = append(want, "step_completed:error")
					break
				}
				want = append(want, "step_started", "step_delta", "step_completed:llm")
				steps++
				if i == 5 {
					break
				}
				if steps >= tc.maxSteps {
					want = append(want, "step_completed:error")
					break
				}
				want = append(want, "step_started", "step_completed:tool")
				steps++
			}
			want = append(want, "run_finished")
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events\n got %v\nwant %v", got, want)
			}
		})
	}
}
