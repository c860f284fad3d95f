package postgres_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// twoInstances opens two stores on one fresh schema: two pools, as two
// processes would have.
func twoInstances(t *testing.T) [2]*postgres.Store {
	t.Helper()
	schema := freshSchema(t)
	return [2]*postgres.Store{
		open(t, postgres.Config{Schema: schema, MaxConns: 4}),
		open(t, postgres.Config{Schema: schema, MaxConns: 4}),
	}
}

func userStep(sessionID, id string) *steptype.Step {
	return &steptype.Step{ID: id, SessionID: sessionID, Kind: steptype.KindUser, Status: steptype.StepCompleted,
		Role: steptype.RoleUser, Content: id}
}

func TestInstancesAppendGapFree(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sts := twoInstances(t)
	if _, err := sts[0].SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	const goroutines, per = 16, 15 // per instance
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	// Each step id is appended by both instances at once: one insert
	// wins, the other append returns the stored row.
	got := map[string][]*steptype.Step{}
	for i, st := range sts {
		for g := range goroutines {
			wg.Go(func() {
				for k := range per {
					id := fmt.Sprintf("g%d-%d", g, k)
					out, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{userStep("s1", id)}})
					mu.Lock()
					if err != nil {
						errs = append(errs, fmt.Errorf("instance %d: %w", i, err))
					} else {
						got[id] = append(got[id], out[0])
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d appends failed, first: %v", len(errs), errs[0])
	}
	const n = goroutines * per
	for id, rows := range got {
		if len(rows) != 2 || rows[0].Sequence != rows[1].Sequence || !rows[0].CreatedAt.Equal(rows[1].CreatedAt) {
			t.Errorf("step %s: the two appends returned %d rows, %v", id, len(rows), rows)
		}
	}
	for i, st := range sts {
		all, err := st.StepList(ctx, &store.StepListParams{SessionID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for k, s := range all {
			if s.Sequence != int64(k+1) {
				t.Fatalf("instance %d: step %d has sequence %d: gap or duplicate", i, k, s.Sequence)
			}
			ids[s.ID] = true
		}
		if len(all) != n || len(ids) != n {
			t.Errorf("instance %d: %d steps, %d ids, want %d", i, len(all), len(ids), n)
		}
		sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: "s1"})
		if err != nil || sess.LastSequence != n {
			t.Errorf("instance %d: LastSequence %v, %v; want %d", i, sess, err, n)
		}
	}
}

func TestInstancesClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sts := twoInstances(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const runs = 60
	for i := range runs {
		// One session per run: a session has one unfinished run at a time.
		sid := fmt.Sprintf("s%02d", i)
		if _, err := sts[0].SessionCreate(ctx, &store.SessionCreateParams{ID: sid}); err != nil {
			t.Fatal(err)
		}
		if _, err := sts[i%2].RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: fmt.Sprintf("r%02d", i),
			SessionID: sid, Agent: "a", CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	owners := map[string][]string{}
	var wg sync.WaitGroup
	for i, st := range sts {
		for g := range 8 {
			owner := fmt.Sprintf("i%d-w%d", i, g)
			wg.Go(func() {
				for {
					got, err := st.RunClaim(ctx, &store.RunClaimParams{Owner: owner, Lease: time.Hour, Limit: 3, Now: t0})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, r := range got {
						owners[r.ID] = append(owners[r.ID], owner)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(owners) != runs {
		t.Errorf("%d runs claimed, want %d", len(owners), runs)
	}
	for id, o := range owners {
		if len(o) != 1 {
			t.Errorf("run %s claimed by %v", id, o)
		}
	}
	// Each stored lease names the one owner that was told it won.
	all, err := sts[1].RunList(ctx, &store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if o := owners[r.ID]; r.Status != steptype.RunRunning || len(o) != 1 || r.LeaseOwner != o[0] {
			t.Errorf("run %s: status %s owner %q, claimed by %v", r.ID, r.Status, r.LeaseOwner, o)
		}
	}
	// When the leases expire the other instance takes the runs over, and
	// the previous owners are fenced out.
	got, err := sts[1].RunClaim(ctx, &store.RunClaimParams{Owner: "late", Lease: time.Minute, ID: "r00", Now: t0.Add(time.Hour)})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim after expiry = %v, %v", got, err)
	}
	_, err = sts[0].RunUpdate(ctx, &store.RunUpdateParams{ID: "r00", Owner: owners["r00"][0], Cursor: ptr("x")})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("update by the expired owner: %v, want ErrConflict", err)
	}
}

func TestInstancesResolveOneWinner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sts := twoInstances(t)
	if _, err := sts[0].SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sts[0].RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a",
		Status: steptype.RunWaiting}}); err != nil {
		t.Fatal(err)
	}
	var steps []*steptype.Step
	for i := range 2 {
		s := userStep("s1", fmt.Sprint("w", i))
		s.RunID, s.Kind, s.Status = "r1", steptype.KindInput, steptype.StepWaiting
		steps = append(steps, s)
	}
	if _, err := sts[1].StepAppend(ctx, &store.StepAppendParams{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	// 2 instances × 8 goroutines answer each of the two inputs: one win
	// per input, and the run is requeued once both are answered.
	var mu sync.Mutex
	wins := map[string]int{}
	var wg sync.WaitGroup
	for i := range 16 {
		st := sts[i%2]
		for _, id := range []string{"w0", "w1"} {
			wg.Go(func() {
				_, err := st.StepResolve(ctx, &store.StepResolveParams{ID: id, RunID: "r1", Status: steptype.StepCompleted,
					Outputs: json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)), QueueRun: true})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins[id]++
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("resolve %s: %v", id, err)
				}
			})
		}
	}
	wg.Wait()
	if wins["w0"] != 1 || wins["w1"] != 1 {
		t.Errorf("wins = %v, want exactly one per step", wins)
	}
	r, err := sts[0].RunGet(ctx, &store.RunGetParams{ID: "r1"})
	if err != nil || r.Status != steptype.RunQueued {
		t.Errorf("run after both answers: %+v, %v; want queued", r, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestInstancesSameIDOtherSessions appends one step id to different
// sessions from both instances at once: the session locks do not order
// them, the primary key does; every call returns the one stored row.
func TestInstancesSameIDOtherSessions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sts := twoInstances(t)
	const n = 16
	for i := range n {
		if _, err := sts[0].SessionCreate(ctx, &store.SessionCreateParams{ID: fmt.Sprint("s", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 5 {
		id := fmt.Sprint("same-", round)
		got := make([]*steptype.Step, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				out, err := sts[i%2].StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{userStep(fmt.Sprint("s", i), id)}})
				if err == nil {
					got[i] = out[0]
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			if got[i].SessionID != got[0].SessionID || got[i].Sequence != got[0].Sequence {
				t.Errorf("append %d returned %s/%d, append 0 %s/%d", i, got[i].SessionID, got[i].Sequence, got[0].SessionID, got[0].Sequence)
			}
		}
	}
	var total int64
	for i := range n {
		c, err := sts[1].StepCount(ctx, &store.StepCountParams{SessionID: fmt.Sprint("s", i)})
		if err != nil {
			t.Fatal(err)
		}
		total += c
	}
	if total != 5 {
		t.Errorf("%d steps stored across the sessions, want 5 (one per id)", total)
	}
}
