package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

func mustRun(t *testing.T, st store.Store, r *steptype.Run) *steptype.Run {
	t.Helper()
	got, err := st.RunCreate(t.Context(), &store.RunCreateParams{Run: r})
	if err != nil {
		t.Fatalf("RunCreate(%s): %v", r.ID, err)
	}
	return got
}

func getRun(t *testing.T, st store.Store, id string) *steptype.Run {
	t.Helper()
	r, err := st.RunGet(t.Context(), &store.RunGetParams{ID: id})
	if err != nil {
		t.Fatalf("RunGet(%s): %v", id, err)
	}
	return r
}

func claim(t *testing.T, st store.Store, p store.RunClaimParams) []string {
	t.Helper()
	before := time.Now()
	runs, err := st.RunClaim(t.Context(), &p)
	if err != nil {
		t.Fatalf("RunClaim(%+v): %v", p, err)
	}
	after := time.Now()
	leased := func(exp time.Time) bool {
		if p.Now.IsZero() { // the database's clock, on this machine
			return !exp.Before(before.Add(p.Lease-time.Second)) && !exp.After(after.Add(p.Lease+time.Second))
		}
		return exp.Equal(p.Now.Add(p.Lease))
	}
	var ids []string
	for _, r := range runs {
		if r.Status != steptype.RunRunning || r.LeaseOwner != p.Owner || !leased(r.LeaseExpires) {
			t.Errorf("claimed run %s: status %s owner %q expires %v", r.ID, r.Status, r.LeaseOwner, r.LeaseExpires)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// runsAt creates runs r0..r(n-1) in session s1, created one second apart.
// runsAt creates runs r0…r(n-1), a second apart, each in its own session
// rs0…: a session has at most one unfinished top-level run.
func runsAt(t *testing.T, st store.Store, n int, status steptype.RunStatus) {
	t.Helper()
	for i := range n {
		sid := fmt.Sprintf("rs%d", i)
		mustSession(t, st, sid)
		mustRun(t, st, &steptype.Run{ID: fmt.Sprintf("r%d", i), SessionID: sid, Agent: "a", Status: status,
			CreatedAt: t0.Add(time.Duration(i) * time.Second)})
	}
}

func testRuns(t *testing.T, h *harness) {
	h.sub(t, "CreateGet", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		full := &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", ParentRunID: "r0", ParentStepID: "st0", Hop: 1,
			Status: steptype.RunRunning, Cursor: "llm", State: json.RawMessage(`{"x":[1]}`), Input: "hi", Output: "out",
			Error: &steptype.StepError{Message: "boom", Class: steptype.ErrorPermanent}, StepCount: 3,
			Options: json.RawMessage(`{"o":true}`), LeaseOwner: "w", LeaseExpires: t0.Add(time.Minute),
			CreatedAt: t0, UpdatedAt: t0.Add(time.Second), FinishedAt: t0.Add(2 * time.Second)}
		got := mustRun(t, st, full)
		sameJSON(t, "created", got, full)
		sameJSON(t, "got", getRun(t, st, "r1"), full)
		got.State[2] = 'y'
		if r := getRun(t, st, "r1"); string(r.State) != `{"x":[1]}` {
			t.Errorf("mutating a returned run changed the store: %s", r.State)
		}
		def := mustRun(t, st, &steptype.Run{ID: "r2", SessionID: "s1", Agent: "a"})
		if def.Status != steptype.RunQueued || def.CreatedAt.IsZero() || !def.UpdatedAt.Equal(def.CreatedAt) {
			t.Errorf("defaults: %+v", def)
		}
		_, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r1", SessionID: "s1", Agent: "b"}})
		wantErr(t, "duplicate run", err, store.ErrConflict)
		for name, r := range map[string]*steptype.Run{
			"no id":      {SessionID: "s1", Agent: "a"},
			"no session": {ID: "r3", Agent: "a"},
			"no agent":   {ID: "r3", SessionID: "s1"},
			"bad status": {ID: "r3", SessionID: "s1", Agent: "a", Status: "bogus"},
			"bad state":  {ID: "r3", SessionID: "s1", Agent: "a", State: json.RawMessage(`{`)},
		} {
			_, err := st.RunCreate(ctx, &store.RunCreateParams{Run: r})
			wantErr(t, name, err, store.ErrInvalid)
		}
		_, err = st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r3", SessionID: "nope", Agent: "a"}})
		wantErr(t, "unknown session", err, store.ErrNotFound)
		_, err = st.RunGet(ctx, &store.RunGetParams{ID: "r3"})
		wantErr(t, "no run created", err, store.ErrNotFound)
	})
	h.sub(t, "CreateWithSession", func(t *testing.T, st store.Store) {
		// RunCreateParams.Session: the session and its run in one
		// transaction, both or neither.
		ctx := t.Context()
		created, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", CreatedAt: t0},
			Session: &store.SessionCreateParams{ID: "s1", Agent: "a", Title: "t", Metadata: json.RawMessage(`{"k":"v"}`), Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if created.Status != steptype.RunQueued || created.SessionID != "s1" {
			t.Errorf("created %+v", created)
		}
		sameJSON(t, "run", getRun(t, st, "r1"), created)
		sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		if sess.Agent != "a" || sess.Title != "t" || string(sess.Metadata) != `{"k":"v"}` || !sess.CreatedAt.Equal(t0) || sess.LastSequence != 0 {
			t.Errorf("session %+v", sess)
		}
		// The session exists already: nothing is written.
		_, err = st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r2", SessionID: "s1", Agent: "a"},
			Session: &store.SessionCreateParams{ID: "s1", Agent: "a"}})
		wantErr(t, "existing session", err, store.ErrConflict)
		_, err = st.RunGet(ctx, &store.RunGetParams{ID: "r2"})
		wantErr(t, "no run with an existing session", err, store.ErrNotFound)
		// The run cannot be created (its id is taken): no session either.
		_, err = st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r1", SessionID: "s2", Agent: "a"},
			Session: &store.SessionCreateParams{ID: "s2", Agent: "a"}})
		wantErr(t, "duplicate run", err, store.ErrConflict)
		_, err = st.SessionGet(ctx, &store.SessionGetParams{ID: "s2"})
		wantErr(t, "no session without its run", err, store.ErrNotFound)
		// A session that is not the run's.
		_, err = st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r3", SessionID: "s3", Agent: "a"},
			Session: &store.SessionCreateParams{ID: "s4", Agent: "a"}})
		wantErr(t, "another session", err, store.ErrInvalid)
		for _, id := range []string{"s3", "s4"} {
			_, err = st.SessionGet(ctx, &store.SessionGetParams{ID: id})
			wantErr(t, "no session "+id, err, store.ErrNotFound)
		}
		// A leased run with its session, as an engine's own run starts.
		leased, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r5", SessionID: "s5", Agent: "a", Status: steptype.RunRunning, LeaseOwner: "w"},
			LeaseFor: time.Hour, Session: &store.SessionCreateParams{ID: "s5", Agent: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if leased.LeaseExpires.Before(time.Now().Add(50*time.Minute)) || getRun(t, st, "r5").LeaseOwner != "w" {
			t.Errorf("leased run %+v", leased)
		}
	})
	h.sub(t, "List", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		mustSession(t, st, "s2")
		for i, r := range []*steptype.Run{
			{ID: "a", SessionID: "s1", Agent: "x"},
			{ID: "b", SessionID: "s1", Agent: "y", ParentRunID: "a", Status: steptype.RunCompleted},
			{ID: "c", SessionID: "s2", Agent: "x", Status: steptype.RunWaiting},
			{ID: "d", SessionID: "s1", Agent: "x", ParentRunID: "a", Status: steptype.RunFailed},
		} {
			r.CreatedAt = t0.Add(time.Duration(i) * time.Second)
			mustRun(t, st, r)
		}
		for _, c := range []struct {
			p    store.RunListParams
			want []string
		}{
			{store.RunListParams{}, []string{"d", "c", "b", "a"}},
			{store.RunListParams{SessionID: "s1"}, []string{"d", "b", "a"}},
			{store.RunListParams{ParentRunID: "a"}, []string{"d", "b"}},
			{store.RunListParams{Agent: "x", Limit: 2}, []string{"d", "c"}},
			{store.RunListParams{Statuses: []steptype.RunStatus{steptype.RunQueued, steptype.RunWaiting}}, []string{"c", "a"}},
			{store.RunListParams{SessionID: "s2", Agent: "y"}, nil},
		} {
			runs, err := st.RunList(ctx, &c.p)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, c.want) {
				t.Errorf("RunList(%+v) = %v, want %v", c.p, ids, c.want)
			}
		}
		_, err := st.RunList(ctx, &store.RunListParams{Statuses: []steptype.RunStatus{"bogus"}})
		wantErr(t, "bad status filter", err, store.ErrInvalid)
	})
	h.sub(t, "ClaimLease", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		runsAt(t, st, 3, steptype.RunQueued)
		lease := time.Minute
		if got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: lease, Now: t0}); !slices.Equal(got, []string{"r0"}) {
			t.Errorf("first claim = %v, want the oldest run r0", got)
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: lease, Limit: 5, Now: t0}); !slices.Equal(got, []string{"r1", "r2"}) {
			t.Errorf("second claim = %v, want r1 r2", got)
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "B", Lease: lease, Limit: 5, Now: t0.Add(lease - time.Nanosecond)}); len(got) != 0 {
			t.Errorf("claim before the leases expire = %v, want none", got)
		}
		// A extends r1; r0 and r2 expire.
		if _, err := st.RunUpdate(t.Context(), &store.RunUpdateParams{ID: "r1", Owner: "A", LeaseExpires: ptr(t0.Add(time.Hour))}); err != nil {
			t.Fatal(err)
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "B", Lease: lease, Limit: 5, Now: t0.Add(lease)}); !slices.Equal(got, []string{"r0", "r2"}) {
			t.Errorf("claim after expiry = %v, want r0 r2", got)
		}
		_, err := st.RunUpdate(t.Context(), &store.RunUpdateParams{ID: "r0", Owner: "A", Cursor: ptr("x")})
		wantErr(t, "update by the previous owner", err, store.ErrConflict)
		if r := getRun(t, st, "r0"); r.LeaseOwner != "B" || r.Cursor != "" {
			t.Errorf("r0 = owner %q cursor %q, want B and unchanged", r.LeaseOwner, r.Cursor)
		}
	})
	h.sub(t, "ClaimByID", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		runsAt(t, st, 2, steptype.RunQueued)
		for _, s := range []steptype.RunStatus{steptype.RunWaiting, steptype.RunCompleted, steptype.RunFailed, steptype.RunCancelled} {
			mustSession(t, st, "s-"+string(s))
			mustRun(t, st, &steptype.Run{ID: string(s), SessionID: "s-" + string(s), Agent: "a", Status: s})
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute, ID: "r1", Now: t0}); !slices.Equal(got, []string{"r1"}) {
			t.Errorf("claim r1 = %v", got)
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "B", Lease: time.Minute, ID: "r1", Now: t0}); len(got) != 0 {
			t.Errorf("claim of a held run = %v, want none", got)
		}
		for _, id := range []string{"waiting", "completed", "failed", "cancelled"} {
			if got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute, ID: id, Now: t0.Add(time.Hour)}); len(got) != 0 {
				t.Errorf("claim of %s run = %v, want none", id, got)
			}
		}
		if got := claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute, Limit: 10, Now: t0.Add(time.Hour)}); !slices.Equal(got, []string{"r0", "r1"}) {
			t.Errorf("claim all = %v, want r0 r1 (never waiting or terminal runs)", got)
		}
		_, err := st.RunClaim(ctx, &store.RunClaimParams{Owner: "A", Lease: time.Minute, ID: "nope"})
		wantErr(t, "claim unknown run", err, store.ErrNotFound)
		for name, p := range map[string]store.RunClaimParams{
			"no owner":       {Lease: time.Minute},
			"no lease":       {Owner: "A"},
			"negative limit": {Owner: "A", Lease: time.Minute, Limit: -1},
		} {
			_, err := st.RunClaim(ctx, &p)
			wantErr(t, name, err, store.ErrInvalid)
		}
	})
	h.sub(t, "ClaimConcurrent", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		const runs = 10
		runsAt(t, st, runs, steptype.RunQueued)
		var mu sync.Mutex
		owners := map[string]int{}
		var wg sync.WaitGroup
		for g := range h.opts.Concurrency {
			wg.Go(func() {
				got, err := st.RunClaim(t.Context(), &store.RunClaimParams{Owner: fmt.Sprint("w", g), Lease: time.Minute, Limit: 2, Now: t0})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, r := range got {
					owners[r.ID]++
				}
			})
		}
		wg.Wait()
		if len(owners) != runs {
			t.Errorf("%d runs claimed, want %d", len(owners), runs)
		}
		for id, n := range owners {
			if n != 1 {
				t.Errorf("run %s claimed %d times", id, n)
			}
		}
	})
	h.sub(t, "Update", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Cursor: "start", State: json.RawMessage(`{"a":1}`)})
		claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute, Now: t0})
		now := t0.Add(time.Second)
		got, err := st.RunUpdate(ctx, &store.RunUpdateParams{ID: "r1", Owner: "A", ExpectStatus: []steptype.RunStatus{steptype.RunRunning},
			Status: ptr(steptype.RunCompleted), Output: ptr("done"), Error: &steptype.StepError{Message: "m"},
			Options: json.RawMessage(`{"o":1}`), StepDelta: 2, ClearLease: true, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		want := &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunCompleted, Cursor: "start",
			State: json.RawMessage(`{"a":1}`), Output: "done", Error: &steptype.StepError{Message: "m"}, StepCount: 2,
			Options: json.RawMessage(`{"o":1}`), CreatedAt: got.CreatedAt, UpdatedAt: now, FinishedAt: now}
		sameJSON(t, "updated", got, want)
		sameJSON(t, "stored", getRun(t, st, "r1"), want)
		for name, c := range map[string]struct {
			p    store.RunUpdateParams
			want error
		}{
			"owner fence":     {store.RunUpdateParams{ID: "r1", Owner: "A", Cursor: ptr("x")}, store.ErrConflict},
			"expected status": {store.RunUpdateParams{ID: "r1", ExpectStatus: []steptype.RunStatus{steptype.RunRunning, steptype.RunWaiting}, Cursor: ptr("x")}, store.ErrConflict},
			"unknown run":     {store.RunUpdateParams{ID: "nope", Cursor: ptr("x")}, store.ErrNotFound},
			"no id":           {store.RunUpdateParams{Cursor: ptr("x")}, store.ErrInvalid},
			"bad status":      {store.RunUpdateParams{ID: "r1", Status: ptr(steptype.RunStatus("bogus"))}, store.ErrInvalid},
			"bad state":       {store.RunUpdateParams{ID: "r1", State: json.RawMessage(`{`)}, store.ErrInvalid},
		} {
			_, err := st.RunUpdate(ctx, &c.p)
			wantErr(t, name, err, c.want)
		}
		sameJSON(t, "unchanged by failed updates", getRun(t, st, "r1"), want)
	})
}
