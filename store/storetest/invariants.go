package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// waitingRunIn creates session sid and a waiting run rid with n waiting
// input steps rid-w1..rid-wn.
func waitingRunIn(t *testing.T, st store.Store, sid, rid string, n int) {
	t.Helper()
	mustSession(t, st, sid)
	mustRun(t, st, &steptype.Run{ID: rid, SessionID: sid, Agent: "a", Status: steptype.RunWaiting})
	var steps []*steptype.Step
	for i := 1; i <= n; i++ {
		s := newStep(sid, fmt.Sprintf("%s-w%d", rid, i))
		s.RunID, s.Kind, s.Status, s.Role, s.Content = rid, steptype.KindInput, steptype.StepWaiting, steptype.RoleTool, "?"
		s.Inputs = json.RawMessage(`{"prompt":"approve?"}`)
		steps = append(steps, s)
	}
	mustAppend(t, st, steps...)
}

func cancelRun(st store.Store, t *testing.T, id string) (*steptype.Run, error) {
	return st.RunUpdate(t.Context(), &store.RunUpdateParams{ID: id,
		ExpectStatus: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting},
		Status:       ptr(steptype.RunCancelled), ClearLease: true, Error: &steptype.StepError{Message: "stop", Code: "cancelled"}})
}

func waitingOf(t *testing.T, st store.Store, runID string) int {
	t.Helper()
	steps, err := st.StepList(t.Context(), &store.StepListParams{RunID: runID, Status: steptype.StepWaiting})
	if err != nil {
		t.Fatal(err)
	}
	return len(steps)
}

// testInvariants checks the invariants the engine relies on: one
// unfinished top-level run per session, a finished run's requests closed
// with it, answers and cancels with one winner, no truncation under a run,
// lease renewal in one call on the database's clock, claims by agent.
func testInvariants(t *testing.T, h *harness) {
	h.sub(t, "OneUnfinishedRunPerSession", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		n := h.opts.Concurrency
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: fmt.Sprint("r", i), SessionID: "s1", Agent: "a"}})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, store.ErrSessionBusy) || !errors.Is(err, store.ErrConflict):
					t.Errorf("concurrent start %d: %v, want ErrSessionBusy (an ErrConflict)", i, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d of %d concurrent starts on one session succeeded, want exactly 1", wins.Load(), n)
		}
		runs, err := st.RunList(ctx, &store.RunListParams{SessionID: "s1"})
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs of the session = %d, %v; want 1", len(runs), err)
		}
		// Sub-agent runs (hop > 0) do not count; a finished run frees the session.
		mustRun(t, st, &steptype.Run{ID: "child", SessionID: "s1", Agent: "a", Hop: 1, ParentRunID: runs[0].ID})
		_, err = st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "waiting", SessionID: "s1", Agent: "a", Status: steptype.RunWaiting}})
		wantErr(t, "a waiting run next to a queued one", err, store.ErrSessionBusy)
		mustRun(t, st, &steptype.Run{ID: "done", SessionID: "s1", Agent: "a", Status: steptype.RunCompleted})
		if _, err := st.RunUpdate(ctx, &store.RunUpdateParams{ID: runs[0].ID, Status: ptr(steptype.RunCompleted)}); err != nil {
			t.Fatal(err)
		}
		mustRun(t, st, &steptype.Run{ID: "next", SessionID: "s1", Agent: "a"})
		_, err = st.RunUpdate(ctx, &store.RunUpdateParams{ID: "done", Status: ptr(steptype.RunQueued)})
		wantErr(t, "requeue a finished run next to an unfinished one", err, store.ErrSessionBusy)
		if r := getRun(t, st, "done"); r.Status != steptype.RunCompleted {
			t.Errorf("refused update changed the run to %s", r.Status)
		}
	})
	h.sub(t, "FinishClosesRequests", func(t *testing.T, st store.Store) {
		waitingRunIn(t, st, "s1", "r1", 2)
		if _, err := cancelRun(st, t, "r1"); err != nil {
			t.Fatal(err)
		}
		if n := waitingOf(t, st, "r1"); n != 0 {
			t.Errorf("%d requests still waiting after the cancel, want 0", n)
		}
		for _, id := range []string{"r1-w1", "r1-w2"} {
			s, err := st.StepGet(t.Context(), &store.StepGetParams{ID: id})
			if err != nil || s.Status != steptype.StepCancelled || s.Error == nil || s.Error.Code != "run_cancelled" {
				t.Errorf("request %s after the cancel = %+v, %v; want cancelled with code run_cancelled", id, s, err)
			}
		}
		_, err := st.StepResolve(t.Context(), &store.StepResolveParams{ID: "r1-w1", RunID: "r1", Status: steptype.StepCompleted, QueueRun: true})
		wantErr(t, "answer after the cancel", err, store.ErrConflict)
		// The same for a run failed along with a step commit.
		waitingRunIn(t, st, "s2", "r2", 1)
		_, err = st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{{ID: "e", SessionID: "s2", RunID: "r2",
			Kind: steptype.KindError, Status: steptype.StepFailed}}, Runs: []*store.RunUpdateParams{{ID: "r2", Status: ptr(steptype.RunFailed)}}})
		if err != nil {
			t.Fatal(err)
		}
		if n := waitingOf(t, st, "r2"); n != 0 {
			t.Errorf("%d requests still waiting after the run failed, want 0", n)
		}
	})
	h.sub(t, "AnswerRacesCancel", func(t *testing.T, st store.Store) {
		const rounds = 20
		for i := range rounds {
			sid, rid := fmt.Sprint("s", i), fmt.Sprint("r", i)
			waitingRunIn(t, st, sid, rid, 1)
			var answerErr, cancelErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, answerErr = st.StepResolve(t.Context(), &store.StepResolveParams{ID: rid + "-w1", RunID: rid, Status: steptype.StepCompleted, Content: "yes", QueueRun: true})
			})
			wg.Go(func() { _, cancelErr = cancelRun(st, t, rid) })
			wg.Wait()
			if answerErr != nil && !errors.Is(answerErr, store.ErrConflict) {
				t.Fatalf("round %d: answer: %v", i, answerErr)
			}
			if cancelErr != nil {
				t.Fatalf("round %d: cancel: %v (a waiting or queued run can always be cancelled)", i, cancelErr)
			}
			s, err := st.StepGet(t.Context(), &store.StepGetParams{ID: rid + "-w1"})
			if err != nil {
				t.Fatal(err)
			}
			r := getRun(t, st, rid)
			switch {
			case answerErr == nil && s.Status == steptype.StepCompleted && r.Status == steptype.RunCancelled:
				// The answer won; the cancel then stopped the queued run.
			case answerErr != nil && s.Status == steptype.StepCancelled && r.Status == steptype.RunCancelled:
				// The cancel won and closed the request.
			default:
				t.Fatalf("round %d: answer err %v, request %s, run %s: not one consistent winner", i, answerErr, s.Status, r.Status)
			}
		}
	})
	h.sub(t, "TruncateRefusedUnderRun", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		mustAppend(t, st, newStep("s1", "a"), newStep("s1", "b"))
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunWaiting})
		_, err := st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: "s1", StartSeq: 2})
		wantErr(t, "truncate while a run waits", err, store.ErrConflict)
		if n := getSession(t, st, "s1").LastSequence; n != 2 {
			t.Errorf("refused truncation left %d steps, want 2", n)
		}
		if _, err := cancelRun(st, t, "r1"); err != nil {
			t.Fatal(err)
		}
		if n, err := st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: "s1", StartSeq: 2}); err != nil || n != 1 {
			t.Errorf("truncate after the run finished = %d, %v; want 1", n, err)
		}
	})
	h.sub(t, "ExpireFailsRunOnce", func(t *testing.T, st store.Store) {
		waitingRunIn(t, st, "s1", "r1", 2)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, err := st.StepResolve(t.Context(), &store.StepResolveParams{ID: "r1-w1", RunID: "r1", Status: steptype.StepExpired,
					FailRun: &steptype.StepError{Message: "expired", Code: "input_expired"}})
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, store.ErrConflict) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Errorf("%d concurrent expiries succeeded, want 1", wins.Load())
		}
		r := getRun(t, st, "r1")
		if r.Status != steptype.RunFailed || r.Error == nil || r.Error.Code != "input_expired" || r.FinishedAt.IsZero() {
			t.Errorf("run after expiry = %s %+v, want failed with input_expired", r.Status, r.Error)
		}
		if n := waitingOf(t, st, "r1"); n != 0 {
			t.Errorf("%d requests still waiting after the run failed, want 0", n)
		}
	})
	h.sub(t, "Expiring", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunWaiting})
		req := func(id, expires string, status steptype.StepStatus) *steptype.Step {
			s := newStep("s1", id)
			s.RunID, s.Kind, s.Status, s.Role = "r1", steptype.KindInput, status, steptype.RoleTool
			s.Inputs = json.RawMessage(`{"prompt":"?"` + expires + `}`)
			return s
		}
		at := func(d time.Duration) string { return `,"expires_at":"` + t0.Add(d).Format(time.RFC3339Nano) + `"` }
		mustAppend(t, st, req("late", at(2*time.Minute), steptype.StepWaiting), req("never", "", steptype.StepWaiting),
			req("soon", at(time.Minute), steptype.StepWaiting), req("done", at(0), steptype.StepCompleted))
		ids := func(before time.Time, limit int) []string {
			t.Helper()
			steps, err := st.StepExpiring(ctx, &store.StepExpiringParams{Before: before, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, s := range steps {
				out = append(out, s.ID)
			}
			return out
		}
		if got := ids(t0.Add(90*time.Second), 0); !slices.Equal(got, []string{"soon"}) {
			t.Errorf("expiring by +90s = %v, want soon", got)
		}
		if got := ids(t0.Add(time.Hour), 0); !slices.Equal(got, []string{"soon", "late"}) {
			t.Errorf("expiring by +1h = %v, want soon late (soonest first; not the answered or the endless one)", got)
		}
		if got := ids(t0.Add(time.Hour), 1); !slices.Equal(got, []string{"soon"}) {
			t.Errorf("expiring by +1h, limit 1 = %v", got)
		}
		if _, err := st.StepResolve(ctx, &store.StepResolveParams{ID: "soon", Status: steptype.StepCompleted}); err != nil {
			t.Fatal(err)
		}
		if got := ids(t0.Add(time.Hour), 0); !slices.Equal(got, []string{"late"}) {
			t.Errorf("after answering soon = %v, want late", got)
		}
		_, err := st.StepExpiring(ctx, &store.StepExpiringParams{})
		wantErr(t, "no time", err, store.ErrInvalid)
	})
	h.sub(t, "LeaseRenew", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		runsAt(t, st, 4, steptype.RunQueued)
		before := time.Now()
		got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Hour, Limit: 3})
		if len(got) != 3 {
			t.Fatalf("claimed %v", got)
		}
		claim(t, st, store.RunClaimParams{Owner: "B", Lease: time.Hour})
		if r := getRun(t, st, "r0"); r.LeaseExpires.Before(before.Add(time.Hour-time.Minute)) || r.LeaseExpires.After(time.Now().Add(time.Hour+time.Minute)) {
			t.Errorf("lease of a claim on the database clock expires at %v, want about an hour from %v", r.LeaseExpires, before)
		}
		if _, err := cancelRun(st, t, "r2"); err != nil {
			t.Fatal(err)
		}
		renewed, err := st.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{Owner: "A", Lease: 2 * time.Hour, IDs: []string{"r0", "r1", "r2", "r3", "nope"}})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(renewed)
		if !slices.Equal(renewed, []string{"r0", "r1"}) {
			t.Errorf("renewed %v, want r0 r1 (not the cancelled run, not B's, not unknown ones)", renewed)
		}
		if r := getRun(t, st, "r1"); r.LeaseExpires.Before(before.Add(2*time.Hour-time.Minute)) || r.LeaseOwner != "A" {
			t.Errorf("renewed lease = %s until %v, want A for about two hours", r.LeaseOwner, r.LeaseExpires)
		}
		if r := getRun(t, st, "r3"); r.LeaseOwner != "B" || r.LeaseExpires.After(time.Now().Add(time.Hour+time.Minute)) {
			t.Errorf("another owner's lease changed: %s until %v", r.LeaseOwner, r.LeaseExpires)
		}
		if ids, err := st.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{Owner: "A", Lease: time.Hour}); err != nil || len(ids) != 0 {
			t.Errorf("renew nothing = %v, %v", ids, err)
		}
		_, err = st.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{Owner: "A", IDs: []string{"r0"}})
		wantErr(t, "renew without a lease length", err, store.ErrInvalid)
		// LeaseFor counts from the database's clock too.
		if _, err := st.RunUpdate(ctx, &store.RunUpdateParams{ID: "r0", Owner: "A", LeaseFor: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if r := getRun(t, st, "r0"); r.LeaseExpires.After(time.Now().Add(2 * time.Minute)) {
			t.Errorf("LeaseFor a minute: expires %v", r.LeaseExpires)
		}
	})
	h.sub(t, "ClaimByAgent", func(t *testing.T, st store.Store) {
		for i, agent := range []string{"x", "y", "x", "z"} {
			sid := fmt.Sprint("s", i)
			mustSession(t, st, sid)
			mustRun(t, st, &steptype.Run{ID: fmt.Sprint("r", i), SessionID: sid, Agent: agent, CreatedAt: t0.Add(time.Duration(i) * time.Second)})
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute, Limit: 10, Agents: []string{"x", "z"}, Now: t0}); !slices.Equal(got, []string{"r0", "r2", "r3"}) {
			t.Errorf("claim of agents x z = %v, want r0 r2 r3", got)
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "B", Lease: time.Minute, Limit: 10, Agents: []string{"w"}, Now: t0}); len(got) != 0 {
			t.Errorf("claim of an agent with no runs = %v", got)
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "B", Lease: time.Minute, Limit: 10, Now: t0}); !slices.Equal(got, []string{"r1"}) {
			t.Errorf("claim of any agent = %v, want r1", got)
		}
	})
}
