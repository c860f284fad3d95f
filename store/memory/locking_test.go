package memory_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// must returns v, failing the test (by a panic, on the test's goroutine)
// on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A run's waiting step stored in another session than the run's: the
// per-session paths cannot close it under the run's session lock alone, so
// they fall back to the store-wide lock; the step must still close with the
// run, and a resolve must still see it.
func TestCrossSessionWaitingSteps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := memory.New()
	defer st.Close()
	for _, id := range []string{"a", "b"} {
		must(st.SessionCreate(ctx, &store.SessionCreateParams{ID: id}))
	}
	must(st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "a", Agent: "x", Status: steptype.RunWaiting}}))
	waiting := func(id, session string) *steptype.Step {
		return &steptype.Step{ID: id, SessionID: session, RunID: "r", Kind: steptype.KindInput, Status: steptype.StepWaiting, Role: steptype.RoleTool, Content: "?"}
	}
	must(st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{waiting("wa", "a"), waiting("wb", "b")}}))

	// Answering wa while wb (in b) still waits: the run is not requeued.
	must(st.StepResolve(ctx, &store.StepResolveParams{ID: "wa", Status: steptype.StepCompleted, Outputs: []byte(`{"ok":true}`), QueueRun: true}))
	if r := must(st.RunGet(ctx, &store.RunGetParams{ID: "r"})); r.Status != steptype.RunWaiting {
		t.Fatalf("run %s after answering one of two requests, want waiting", r.Status)
	}
	// Cancelling the run closes wb, in the other session.
	must(st.RunUpdate(ctx, &store.RunUpdateParams{ID: "r", Status: ptr(steptype.RunCancelled)}))
	wb := must(st.StepGet(ctx, &store.StepGetParams{ID: "wb"}))
	if wb.Status != steptype.StepCancelled || wb.Error == nil || wb.Error.Code != "run_cancelled" {
		t.Fatalf("wb after the run was cancelled: %s %+v, want cancelled with code run_cancelled", wb.Status, wb.Error)
	}
	if wa := must(st.StepGet(ctx, &store.StepGetParams{ID: "wa"})); wa.Status != steptype.StepCompleted {
		t.Fatalf("wa %s, want the answer kept", wa.Status)
	}
	// Nothing waits any more: expiry finds nothing.
	if due := must(st.StepExpiring(ctx, &store.StepExpiringParams{Before: time.Now().Add(time.Hour)})); len(due) != 0 {
		t.Fatalf("%d expiring steps after the cancel, want 0", len(due))
	}
}

func ptr[T any](v T) *T { return &v }

// Many sessions written at once, each by its own goroutine, with steps
// that also land in a shared session, run updates, claims and reads across
// sessions interleaved (an append changes the session record in place):
// under -race this exercises the session locks, the sharded indexes and
// the fallback to the store-wide lock. Every session
// must end with gap-free sequences and run step counts that match.
func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := memory.New()
	defer st.Close()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	const sessions, steps = 16, 40
	must(st.SessionCreate(ctx, &store.SessionCreateParams{ID: "shared"}))
	for i := range sessions {
		sid := fmt.Sprint("s", i)
		must(st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid}))
		must(st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r" + sid, SessionID: sid, Agent: "x"}}))
	}
	var wg sync.WaitGroup
	for i := range sessions {
		sid := fmt.Sprint("s", i)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() {
			for n := range steps {
				s := &steptype.Step{ID: fmt.Sprint(sid, "-", n), SessionID: sid, RunID: "r" + sid, Kind: steptype.KindLLM, Status: steptype.StepCompleted, Content: "x"}
				batch := []*steptype.Step{s}
				if rng.IntN(4) == 0 { // also a step of this run in the shared session
					batch = append(batch, &steptype.Step{ID: fmt.Sprint(sid, "-shared-", n), SessionID: "shared", RunID: "r" + sid, Kind: steptype.KindTool, Status: steptype.StepCompleted})
				}
				if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch, Runs: []*store.RunUpdateParams{{ID: "r" + sid, StepDelta: int64(len(batch))}}}); err != nil {
					t.Error(err)
					return
				}
				other := "r" + fmt.Sprint("s", (i+1)%sessions) // a run another goroutine appends to
				switch rng.IntN(6) {
				case 0:
					_, _ = st.RunList(ctx, &store.RunListParams{})
				case 1:
					_, _ = st.StepList(ctx, &store.StepListParams{SessionID: "shared"})
				case 2:
					// A lease that expires at once: every claim takes runs
					// that other goroutines append to.
					_, _ = st.RunClaim(ctx, &store.RunClaimParams{Owner: "o", Lease: time.Nanosecond, Limit: 2})
				case 3:
					_, _ = st.StepList(ctx, &store.StepListParams{RunID: "r" + sid})
				case 4: // reads of records an append changes in place
					_, _ = st.SessionGet(ctx, &store.SessionGetParams{ID: "shared"})
					_, _ = st.StepLast(ctx, &store.StepLastParams{SessionID: "shared"})
					_, _ = st.StepGet(ctx, &store.StepGetParams{ID: s.ID})
				case 5: // an append changes a run's step fields in place
					_, _ = st.RunGet(ctx, &store.RunGetParams{ID: other})
					_, _ = st.RunUpdate(ctx, &store.RunUpdateParams{ID: other, Output: &sid})
					_, _ = st.RunClaim(ctx, &store.RunClaimParams{ID: other, Owner: "o", Lease: time.Nanosecond})
				}
			}
		})
	}
	wg.Wait()
	total := int64(0)
	for i := range sessions {
		sid := fmt.Sprint("s", i)
		list := must(st.StepList(ctx, &store.StepListParams{SessionID: sid}))
		for k, s := range list {
			if s.Sequence != int64(k+1) {
				t.Fatalf("%s: step %d has sequence %d", sid, k, s.Sequence)
			}
		}
		mine := must(st.StepList(ctx, &store.StepListParams{RunID: "r" + sid}))
		r := must(st.RunGet(ctx, &store.RunGetParams{ID: "r" + sid}))
		if len(list) != steps || r.StepCount != int64(len(mine)) {
			t.Fatalf("%s: %d steps (want %d), run counts %d of its %d", sid, len(list), steps, r.StepCount, len(mine))
		}
		total += r.StepCount - steps
	}
	shared := must(st.StepList(ctx, &store.StepListParams{SessionID: "shared"}))
	if int64(len(shared)) != total {
		t.Fatalf("shared session holds %d steps, the runs counted %d there", len(shared), total)
	}
	for k, s := range shared {
		if s.Sequence != int64(k+1) {
			t.Fatalf("shared: step %d has sequence %d", k, s.Sequence)
		}
	}
}

// A step re-appended under its id with another session than the one
// storing it: the append takes the store-wide lock (the per-session path
// holds only the new session's lock) and answers as for any re-append, the
// stored step, without touching either session.
func TestReappendInAnotherSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := memory.New()
	for _, id := range []string{"s1", "s2"} {
		must(m.SessionCreate(ctx, &store.SessionCreateParams{ID: id, Agent: "a"}))
	}
	first := must(m.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{
		{ID: "x", SessionID: "s1", Kind: steptype.KindCustom, Name: "n", Status: steptype.StepCompleted, Content: "one"}}}))[0]
	got := must(m.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{
		{ID: "x", SessionID: "s2", Kind: steptype.KindCustom, Name: "n", Status: steptype.StepCompleted, Content: "two"}}, InPlace: true}))[0]
	if got.SessionID != "s1" || got.Sequence != first.Sequence || got.Content != "one" {
		t.Errorf("re-append in s2 returned %s/%d %q, want the stored s1/%d %q", got.SessionID, got.Sequence, got.Content, first.Sequence, "one")
	}
	for id, want := range map[string]int64{"s1": 1, "s2": 0} {
		if s := must(m.SessionGet(ctx, &store.SessionGetParams{ID: id})); s.LastSequence != want {
			t.Errorf("session %s: last sequence %d, want %d", id, s.LastSequence, want)
		}
	}
	if steps := must(m.StepList(ctx, &store.StepListParams{SessionID: "s2"})); len(steps) != 0 {
		t.Errorf("s2 has %d steps, want none", len(steps))
	}
}
