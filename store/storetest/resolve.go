package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// waitingRun creates session s1 and a waiting run r1 with n waiting input
// steps w1..wn after one completed step.
func waitingRun(t *testing.T, st store.Store, n int) {
	t.Helper()
	mustSession(t, st, "s1")
	mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunWaiting,
		LeaseOwner: "w1", LeaseExpires: t0.Add(time.Hour)})
	first := newStep("s1", "u")
	first.RunID = "r1"
	steps := []*steptype.Step{first}
	for i := 1; i <= n; i++ {
		s := newStep("s1", fmt.Sprintf("w%d", i))
		s.RunID, s.Kind, s.Status, s.Role, s.Content = "r1", steptype.KindInput, steptype.StepWaiting, steptype.RoleTool, "?"
		s.Inputs = json.RawMessage(`{"prompt":"approve?"}`)
		steps = append(steps, s)
	}
	mustAppend(t, st, steps...)
}

func resolve(t *testing.T, st store.Store, id string, queue bool) (*steptype.Step, error) {
	return st.StepResolve(t.Context(), &store.StepResolveParams{ID: id, RunID: "r1", Status: steptype.StepCompleted,
		Content: "yes", Outputs: json.RawMessage(`{"approved":true}`), QueueRun: queue, Now: t0.Add(time.Minute)})
}

func testResolve(t *testing.T, h *harness) {
	h.sub(t, "WaitingToCompleted", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		waitingRun(t, st, 1)
		got, err := resolve(t, st, "w1", false)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != steptype.StepCompleted || got.Content != "yes" || string(got.Outputs) != `{"approved":true}` ||
			string(got.Inputs) != `{"prompt":"approve?"}` || got.Sequence != 2 {
			t.Errorf("resolved step = %+v", got)
		}
		stored, err := st.StepGet(ctx, &store.StepGetParams{ID: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "stored resolved step", stored, got)
		wantView(t, "no waiting step left", list(t, st, &store.StepListParams{Status: steptype.StepWaiting}), "")
		_, err = resolve(t, st, "w1", false)
		wantErr(t, "second resolve", err, store.ErrConflict)
		if r := getRun(t, st, "r1"); r.Status != steptype.RunWaiting {
			t.Errorf("run status %s without QueueRun, want waiting", r.Status)
		}
	})
	h.sub(t, "KeepsContentWhenEmpty", func(t *testing.T, st store.Store) {
		waitingRun(t, st, 1)
		got, err := st.StepResolve(t.Context(), &store.StepResolveParams{ID: "w1", Status: steptype.StepExpired})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != steptype.StepExpired || got.Content != "?" || got.Outputs != nil {
			t.Errorf("resolved step = %+v", got)
		}
	})
	h.sub(t, "Concurrent", func(t *testing.T, st store.Store) {
		waitingRun(t, st, 1)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		var other []error
		for range h.opts.Concurrency {
			wg.Go(func() {
				_, err := resolve(t, st, "w1", true)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, store.ErrConflict):
					conflicts++
				default:
					other = append(other, err)
				}
			})
		}
		wg.Wait()
		if wins != 1 || conflicts != h.opts.Concurrency-1 || len(other) > 0 {
			t.Errorf("%d wins, %d conflicts, other errors %v; want exactly one win", wins, conflicts, other)
		}
		if r := getRun(t, st, "r1"); r.Status != steptype.RunQueued {
			t.Errorf("run status %s, want queued", r.Status)
		}
	})
	h.sub(t, "QueueRun", func(t *testing.T, st store.Store) {
		waitingRun(t, st, 2)
		if _, err := resolve(t, st, "w1", true); err != nil {
			t.Fatal(err)
		}
		if r := getRun(t, st, "r1"); r.Status != steptype.RunWaiting || r.LeaseOwner != "w1" {
			t.Errorf("run with a step still waiting: status %s owner %q, want waiting w1", r.Status, r.LeaseOwner)
		}
		if _, err := resolve(t, st, "w2", true); err != nil {
			t.Fatal(err)
		}
		r := getRun(t, st, "r1")
		if r.Status != steptype.RunQueued || r.LeaseOwner != "" || !r.LeaseExpires.IsZero() || !r.UpdatedAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("run after last answer = status %s owner %q expires %v updated %v, want queued, no lease", r.Status, r.LeaseOwner, r.LeaseExpires, r.UpdatedAt)
		}
		claimed, err := st.RunClaim(t.Context(), &store.RunClaimParams{Owner: "w2", Lease: time.Minute, Now: t0.Add(2 * time.Minute)})
		if err != nil || len(claimed) != 1 {
			t.Errorf("claim of the requeued run = %v, %v", claimed, err)
		}
	})
	h.sub(t, "QueueRunOnlyWhenWaiting", func(t *testing.T, st store.Store) {
		waitingRun(t, st, 1)
		if _, err := st.RunUpdate(t.Context(), &store.RunUpdateParams{ID: "r1", Status: ptr(steptype.RunQueued)}); err != nil {
			t.Fatal(err)
		}
		if _, err := resolve(t, st, "w1", true); err != nil {
			t.Fatal(err)
		}
		if r := getRun(t, st, "r1"); r.Status != steptype.RunQueued {
			t.Errorf("queued run became %s", r.Status)
		}
	})
	h.sub(t, "Errors", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		waitingRun(t, st, 1)
		_, err := resolve(t, st, "nope", false)
		wantErr(t, "unknown step", err, store.ErrNotFound)
		_, err = st.StepResolve(ctx, &store.StepResolveParams{ID: "w1", RunID: "other", Status: steptype.StepCompleted})
		wantErr(t, "wrong run", err, store.ErrNotFound)
		_, err = resolve(t, st, "u", false)
		wantErr(t, "completed step", err, store.ErrConflict)
		for _, status := range []steptype.StepStatus{"", steptype.StepWaiting, "bogus"} {
			_, err = st.StepResolve(ctx, &store.StepResolveParams{ID: "w1", Status: status})
			wantErr(t, fmt.Sprintf("resolve to %q", status), err, store.ErrInvalid)
		}
		_, err = st.StepResolve(ctx, &store.StepResolveParams{ID: "w1", Status: steptype.StepCompleted, Outputs: json.RawMessage(`{`)})
		wantErr(t, "bad outputs", err, store.ErrInvalid)
		wantView(t, "still waiting", list(t, st, &store.StepListParams{RunID: "r1", Status: steptype.StepWaiting}), "s1/2/w1")
	})
}
