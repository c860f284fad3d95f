package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testCapabilities checks that the driver has the capabilities it
// declares in Options, that a wrapper embedding it keeps them, and that a
// Notifier announces every commit and run status change inside the
// transaction that makes it.
func testCapabilities(t *testing.T, h *harness) {
	h.sub(t, "Declared", func(t *testing.T, st store.Store) {
		wrapped := struct{ store.Store }{st}
		for name, s := range map[string]store.Store{"store": st, "wrapper": wrapped} {
			if got := s.Notifier() != nil; got != h.opts.Notifier {
				t.Errorf("%s: has a Notifier = %v, declared %v", name, got, h.opts.Notifier)
			}
			if got := s.Exclusive(); got != h.opts.Exclusive {
				t.Errorf("%s: Exclusive = %v, declared %v", name, got, h.opts.Exclusive)
			}
			if err := s.Health(t.Context()); err != nil {
				t.Errorf("%s: Health of a fresh store = %v", name, err)
			}
			if got := s.SupportsVectorIndex(); got != h.opts.VectorIndex {
				t.Errorf("%s: SupportsVectorIndex = %v, declared %v", name, got, h.opts.VectorIndex)
			}
		}
	})
	h.sub(t, "ChangeNotifications", func(t *testing.T, st store.Store) {
		n := st.Notifier()
		if n == nil {
			t.Skip("the driver has no Notifier (Options.Notifier is false): changes are seen in-process only")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := n.Listen(ctx, store.ChannelChanges)
		if err != nil {
			t.Fatal(err)
		}
		mustSession(t, st, "s1")
		expect := func(what string, want ...string) {
			t.Helper()
			var got []string
			timeout := time.After(10 * time.Second)
			for !containsAll(got, want) {
				select {
				case p := <-ch:
					got = append(got, p)
				case <-timeout:
					t.Fatalf("%s: notifications %q, want %q among them", what, got, want)
				}
			}
		}
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a"})
		expect("run created", store.ChangeRun("s1", "r1", "queued"))
		claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute})
		in := newStep("s1", "w1")
		in.RunID, in.Kind, in.Status = "r1", steptype.KindInput, steptype.StepWaiting
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{newStep("s1", "u"), in},
			Runs: []*store.RunUpdateParams{{ID: "r1", Owner: "A", Status: ptr(steptype.RunWaiting), ClearLease: true}}}); err != nil {
			t.Fatal(err)
		}
		expect("steps committed with a park", store.ChangeStep("s1", 2), store.ChangeRun("s1", "r1", "waiting"))
		if _, err := st.StepResolve(ctx, &store.StepResolveParams{ID: "w1", RunID: "r1", Status: steptype.StepCompleted, QueueRun: true}); err != nil {
			t.Fatal(err)
		}
		expect("answer requeues the run", store.ChangeRun("s1", "r1", "queued"))
		if _, err := cancelRun(st, t, "r1"); err != nil {
			t.Fatal(err)
		}
		expect("cancel", store.ChangeRun("s1", "r1", "cancelled"))
		// A write that fails announces nothing: the notification commits
		// with the change or not at all.
		_, err = st.RunUpdate(ctx, &store.RunUpdateParams{ID: "r1", ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Status: ptr(steptype.RunCompleted)})
		wantErr(t, "fenced update", err, store.ErrConflict)
		mustSession(t, st, "s2")
		mustAppend(t, st, newStep("s2", "marker"))
		var got []string
		for !slices.Contains(got, store.ChangeStep("s2", 1)) {
			select {
			case p := <-ch:
				got = append(got, p)
			case <-time.After(10 * time.Second):
				t.Fatalf("no notification of the marker commit: %q", got)
			}
		}
		if slices.Contains(got, store.ChangeRun("s1", "r1", "completed")) {
			t.Errorf("a failed update was announced: %q", got)
		}
	})
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
