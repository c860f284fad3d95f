package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// groupFixture is a store with sessions and runs for the group commit tests.
type groupFixture struct {
	t      *testing.T
	st     *postgres.Store
	schema string
}

func newGroupFixture(t *testing.T) *groupFixture {
	schema := freshSchema(t)
	return &groupFixture{t: t, st: open(t, postgres.Config{Schema: schema, MaxConns: 8}), schema: schema}
}

func (f *groupFixture) session(id string) {
	f.t.Helper()
	if _, err := f.st.SessionCreate(f.t.Context(), &store.SessionCreateParams{ID: id}); err != nil {
		f.t.Fatal(err)
	}
}

// run creates a run leased to "me" in status.
func (f *groupFixture) run(id, sessionID string, status steptype.RunStatus) {
	f.t.Helper()
	r := &steptype.Run{ID: id, SessionID: sessionID, Agent: "a", Status: status}
	if status == steptype.RunRunning {
		r.LeaseOwner, r.LeaseExpires = "me", time.Now().Add(time.Hour)
	}
	if _, err := f.st.RunCreate(f.t.Context(), &store.RunCreateParams{Run: r}); err != nil {
		f.t.Fatal(err)
	}
}

// hold locks a session's row from outside the store, so that an append to
// it stays in flight until the returned release is called.
func (f *groupFixture) hold(sessionID string) (release func()) {
	f.t.Helper()
	ctx := f.t.Context()
	conn := rawConn(f.t)
	tx, err := conn.Begin(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	table := pgx.Identifier{f.schema, "sessions"}.Sanitize()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+table+` WHERE id = $1 FOR UPDATE`, sessionID); err != nil {
		f.t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(context.Background()); err != nil {
			f.t.Error(err)
		}
	}
}

// await polls cond until it holds (or fails the test after a minute).
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// groupCase is one append of a group and what it must return.
type groupCase struct {
	name    string
	p       *store.StepAppendParams
	wantErr error // nil: must succeed
	out     []*steptype.Step
	err     error
}

// blockSessions are the sessions runGroup holds, one per group that can
// be in flight.
func blockSessions() []string {
	var ids []string
	for i := range postgres.MaxInFlight {
		ids = append(ids, fmt.Sprintf("block%d", i))
	}
	return ids
}

// runGroup appends to each held block session, so that every group the
// store may have in flight is taken and stays in flight, then appends
// every case: they all queue, and commit together in the next group when
// the block sessions are released.
func (f *groupFixture) runGroup(cases []*groupCase) {
	f.t.Helper()
	ctx := f.t.Context()
	var wg sync.WaitGroup
	var releases []func()
	for i, id := range blockSessions() {
		releases = append(releases, f.hold(id))
		wg.Go(func() {
			if _, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{userStep(id, id+"-1")}}); err != nil {
				f.t.Error(err)
			}
		})
		await(f.t, "the block appends in flight", func() bool { return f.st.GroupInFlight() == i+1 })
	}
	for _, c := range cases {
		wg.Go(func() { c.out, c.err = f.st.StepAppend(ctx, c.p) })
	}
	await(f.t, "every case queued", func() bool { return f.st.GroupQueued() == len(cases) })
	for _, release := range releases {
		release()
	}
	wg.Wait()
	for _, c := range cases {
		switch {
		case c.wantErr == nil && c.err != nil:
			f.t.Errorf("%s: %v, want success", c.name, c.err)
		case c.wantErr != nil && !errors.Is(c.err, c.wantErr):
			f.t.Errorf("%s: error %v, want %v", c.name, c.err, c.wantErr)
		}
	}
}

// stored returns the step with id, or nil when there is none.
func (f *groupFixture) stored(id string) *steptype.Step {
	f.t.Helper()
	s, err := f.st.StepGet(f.t.Context(), &store.StepGetParams{ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *groupFixture) runRow(id string) *steptype.Run {
	f.t.Helper()
	r, err := f.st.RunGet(f.t.Context(), &store.RunGetParams{ID: id})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func stepOf(runID string, s *steptype.Step) *steptype.Step { s.RunID = runID; return s }

func strp(s string) *string { return &s }

// TestGroupCommitChecksEachAppend commits one group holding appends that
// pass and appends that fail their checks: each failure is its caller's
// alone and writes nothing, each success is stored once, the appends to
// one session take consecutive sequences within the group, and every
// success's notification is delivered.
func TestGroupCommitChecksEachAppend(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	ctx := t.Context()
	for _, id := range append(blockSessions(), "a", "b", "c") {
		f.session(id)
	}
	f.run("ra", "a", steptype.RunRunning)
	f.run("rb", "b", steptype.RunRunning)
	if _, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{userStep("c", "c-0")}}); err != nil {
		t.Fatal(err)
	}
	changes, err := f.st.Listen(ctx, store.ChannelChanges)
	if err != nil {
		t.Fatal(err)
	}
	running := []steptype.RunStatus{steptype.RunRunning}
	upd := func(run, owner, cursor string) []*store.RunUpdateParams {
		return []*store.RunUpdateParams{{ID: run, Owner: owner, ExpectStatus: running, Cursor: strp(cursor), StepDelta: 1}}
	}
	seqStep := userStep("c", "c-bad-seq")
	seqStep.Sequence = 9
	cases := []*groupCase{
		{name: "a first", p: &store.StepAppendParams{Steps: []*steptype.Step{stepOf("ra", userStep("a", "a-1"))}, Runs: upd("ra", "me", "x1")}},
		{name: "a second", p: &store.StepAppendParams{Steps: []*steptype.Step{stepOf("ra", userStep("a", "a-2"))}, Runs: upd("ra", "me", "x2")}},
		{name: "b lease lost", p: &store.StepAppendParams{Steps: []*steptype.Step{stepOf("rb", userStep("b", "b-bad-owner"))}, Runs: upd("rb", "other", "y")},
			wantErr: store.ErrConflict},
		{name: "b", p: &store.StepAppendParams{Steps: []*steptype.Step{stepOf("rb", userStep("b", "b-ok"))}, Runs: upd("rb", "me", "y1")}},
		{name: "c wrong sequence", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("c", "c-ok-2"), seqStep}}, wantErr: store.ErrConflict},
		{name: "c", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("c", "c-1")}}},
		{name: "c again", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("c", "c-0")}}},
		{name: "missing session", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("nope", "n-1")}}, wantErr: store.ErrNotFound},
		{name: "missing run", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("a", "a-bad-run")}, Runs: upd("nope", "me", "z")},
			wantErr: store.ErrNotFound},
	}
	commits0, appends0 := f.st.GroupCommitStats()
	f.runGroup(cases)
	commits, appends := f.st.GroupCommitStats()
	if held := int64(postgres.MaxInFlight); commits-commits0 != held+1 || appends-appends0 != held+5 {
		t.Errorf("%d commits for %d appends, want %d for %d (the held appends, then one group of the 5 that passed)",
			commits-commits0, appends-appends0, held+1, held+5)
	}
	for _, id := range []string{"b-bad-owner", "c-ok-2", "c-bad-seq", "n-1", "a-bad-run"} {
		if s := f.stored(id); s != nil {
			t.Errorf("step %s of a failed append is stored (sequence %d)", id, s.Sequence)
		}
	}
	seqs := map[int64]bool{}
	for _, c := range cases[:2] {
		if len(c.out) == 1 {
			seqs[c.out[0].Sequence] = true
			if s := f.stored(c.out[0].ID); s == nil || s.Sequence != c.out[0].Sequence {
				t.Errorf("%s: returned sequence %d, stored %v", c.name, c.out[0].Sequence, s)
			}
		}
	}
	if !seqs[1] || !seqs[2] {
		t.Errorf("the two appends to a got sequences %v, want 1 and 2", seqs)
	}
	if got := cases[5].out; len(got) != 1 || got[0].Sequence != 2 {
		t.Errorf("c: %v, want sequence 2", got)
	}
	if got := cases[6].out; len(got) != 1 || got[0].Sequence != 1 || got[0].ID != "c-0" {
		t.Errorf("c again: %v, want the stored c-0 at sequence 1", got)
	}
	if r := f.runRow("ra"); r.StepCount != 2 || (r.Cursor != "x1" && r.Cursor != "x2") {
		t.Errorf("run ra: %d steps, cursor %q; want 2 and the last append's", r.StepCount, r.Cursor)
	}
	if r := f.runRow("rb"); r.StepCount != 1 || r.Cursor != "y1" {
		t.Errorf("run rb: %d steps, cursor %q; want 1, y1", r.StepCount, r.Cursor)
	}
	want := map[string]bool{store.ChangeStep("a", 1): true, store.ChangeStep("a", 2): true, store.ChangeStep("b", 1): true,
		store.ChangeStep("c", 2): true}
	for _, id := range blockSessions() {
		want[store.ChangeStep(id, 1)] = true
	}
	timeout := time.After(time.Minute)
	for len(want) > 0 {
		select {
		case p := <-changes:
			delete(want, p)
		case <-timeout:
			t.Fatalf("notifications never delivered: %v", want)
		}
	}
}

// TestGroupCommitRefusedAppendFailsAlone: an append the database refuses
// (reviving a finished run while its session has an unfinished one, which
// only the one-unfinished-run index sees) fails alone; the others of its
// group are committed.
func TestGroupCommitRefusedAppendFailsAlone(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	for _, id := range append(blockSessions(), "busy", "a", "b") {
		f.session(id)
	}
	f.run("live", "busy", steptype.RunRunning)
	f.run("done", "busy", steptype.RunCompleted)
	queued := steptype.RunQueued
	cases := []*groupCase{
		{name: "a", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("a", "a-1")}}},
		{name: "revive", p: &store.StepAppendParams{Steps: []*steptype.Step{stepOf("done", userStep("busy", "busy-1"))},
			Runs: []*store.RunUpdateParams{{ID: "done", Status: &queued}}}, wantErr: store.ErrSessionBusy},
		{name: "b", p: &store.StepAppendParams{Steps: []*steptype.Step{userStep("b", "b-1")}}},
		{name: "busy", p: &store.StepAppendParams{Steps: []*steptype.Step{stepOf("live", userStep("busy", "busy-2"))}}},
	}
	f.runGroup(cases)
	if s := f.stored("busy-1"); s != nil {
		t.Errorf("the refused append's step is stored at %d", s.Sequence)
	}
	if r := f.runRow("done"); r.Status != steptype.RunCompleted {
		t.Errorf("the refused append's run is %s", r.Status)
	}
	for _, id := range []string{"a-1", "b-1", "busy-2"} {
		if s := f.stored(id); s == nil || s.Sequence != 1 {
			t.Errorf("step %s: %v, want stored at sequence 1", id, s)
		}
	}
}

// TestGroupCommitConcurrent: many goroutines append at once to many
// sessions, some appends deliberately failing (a lost lease, a wrong
// sequence, a missing session, a revived run the database refuses). Every
// success is stored exactly once at the sequence it returned, every
// failure stored nothing, sequences and run step counts add up, and
// appends were grouped (fewer commits than appends).
func TestGroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := newGroupFixture(t)
	ctx := t.Context()
	const sessions, goroutines, per = 24, 48, 20
	for i := range sessions {
		f.session(fmt.Sprintf("s%02d", i))
		f.run(fmt.Sprintf("r%02d", i), fmt.Sprintf("s%02d", i), steptype.RunRunning)
		f.run(fmt.Sprintf("d%02d", i), fmt.Sprintf("s%02d", i), steptype.RunCompleted)
	}
	type result struct {
		session, run string
		ids          []string
		out          []*steptype.Step
		err, want    error
	}
	results := make([][]result, goroutines)
	commits0, appends0 := f.st.GroupCommitStats()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
		wg.Go(func() {
			<-start
			for k := range per {
				i := rng.IntN(sessions)
				res := result{session: fmt.Sprintf("s%02d", i), run: fmt.Sprintf("r%02d", i)}
				var steps []*steptype.Step
				for n := range 1 + rng.IntN(3) {
					id := fmt.Sprintf("g%d-%d-%d", g, k, n)
					res.ids = append(res.ids, id)
					steps = append(steps, stepOf(res.run, userStep(res.session, id)))
				}
				u := &store.RunUpdateParams{ID: res.run, Owner: "me", ExpectStatus: []steptype.RunStatus{steptype.RunRunning},
					Cursor: strp(res.ids[0]), StepDelta: int64(len(steps))}
				switch rng.IntN(20) {
				case 0: // a lease lost
					u.Owner, res.want = "other", store.ErrConflict
				case 1: // a wrong expected sequence
					steps[len(steps)-1].Sequence, res.want = 1<<40, store.ErrConflict
				case 2: // a missing session
					for _, s := range steps {
						s.SessionID = "missing"
					}
					res.want = store.ErrNotFound
				case 3: // reviving a finished run while the session has an unfinished one
					queued := steptype.RunQueued
					u = &store.RunUpdateParams{ID: fmt.Sprintf("d%02d", i), Status: &queued}
					res.want = store.ErrSessionBusy
				}
				res.out, res.err = f.st.StepAppend(ctx, &store.StepAppendParams{Steps: steps, Runs: []*store.RunUpdateParams{u}})
				results[g] = append(results[g], res)
			}
		})
	}
	close(start)
	wg.Wait()
	okSteps := map[string]int{} // per session
	okAppends := 0
	for _, rs := range results {
		for _, r := range rs {
			if r.want != nil {
				if !errors.Is(r.err, r.want) {
					t.Errorf("append of %v: error %v, want %v", r.ids, r.err, r.want)
				}
				for _, id := range r.ids {
					if s := f.stored(id); s != nil {
						t.Errorf("step %s of a failed append is stored at %s/%d", id, s.SessionID, s.Sequence)
					}
				}
				continue
			}
			if r.err != nil {
				t.Errorf("append of %v: %v", r.ids, r.err)
				continue
			}
			okAppends++
			okSteps[r.session] += len(r.ids)
			for k, s := range r.out {
				if s.ID != r.ids[k] || s.SessionID != r.session {
					t.Errorf("append of %v returned %s in %s", r.ids, s.ID, s.SessionID)
				}
			}
		}
	}
	returned := map[string]int64{}
	for _, rs := range results {
		for _, r := range rs {
			if r.err == nil {
				for _, s := range r.out {
					returned[s.ID] = s.Sequence
				}
			}
		}
	}
	for i := range sessions {
		sid, rid := fmt.Sprintf("s%02d", i), fmt.Sprintf("r%02d", i)
		all, err := f.st.StepList(ctx, &store.StepListParams{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range all {
			if s.Sequence != int64(k+1) {
				t.Fatalf("session %s: step %d has sequence %d: a gap or a duplicate", sid, k, s.Sequence)
			}
			if seq, ok := returned[s.ID]; !ok || seq != s.Sequence {
				t.Errorf("session %s: stored step %s at %d, its append returned %d (ok %v)", sid, s.ID, s.Sequence, seq, ok)
			}
		}
		if len(all) != okSteps[sid] {
			t.Errorf("session %s: %d steps stored, %d appended successfully", sid, len(all), okSteps[sid])
		}
		if r := f.runRow(rid); r.StepCount != int64(okSteps[sid]) {
			t.Errorf("run %s: step count %d, want %d", rid, r.StepCount, okSteps[sid])
		}
	}
	commits, appends := f.st.GroupCommitStats()
	commits, appends = commits-commits0, appends-appends0
	t.Logf("%d appends succeeded in %d commits", appends, commits)
	if appends != int64(okAppends) || commits >= appends {
		t.Errorf("%d commits for %d appends (%d succeeded): want the successes, in fewer commits", commits, appends, okAppends)
	}
}

// TestGroupCommitWithLeaseRenewal: a group holds the locks of many runs
// while the heartbeat renews all their leases in one statement. Both take
// the run rows in id order, so neither deadlocks the other (the runs are
// created in descending id order, so a renewal that locked them in the
// order it finds them would).
func TestGroupCommitWithLeaseRenewal(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	ctx := t.Context()
	const runs, per = 32, 30
	var ids []string
	for i := runs - 1; i >= 0; i-- {
		f.session(fmt.Sprintf("s%02d", i))
		f.run(fmt.Sprintf("r%02d", i), fmt.Sprintf("s%02d", i), steptype.RunRunning)
		ids = append(ids, fmt.Sprintf("r%02d", i))
	}
	done := make(chan struct{})
	var renewals int
	var renewErr error
	var rw sync.WaitGroup
	rw.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			got, err := f.st.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{IDs: ids, Owner: "me", Lease: time.Hour})
			if err != nil || len(got) != runs {
				renewErr = fmt.Errorf("renewal %d: %v, %d runs renewed", renewals, err, len(got))
				return
			}
			renewals++
		}
	})
	var wg sync.WaitGroup
	for i := range runs {
		sid, rid := fmt.Sprintf("s%02d", i), fmt.Sprintf("r%02d", i)
		wg.Go(func() {
			for k := range per {
				_, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{stepOf(rid, userStep(sid, fmt.Sprintf("%s-%d", sid, k)))},
					Runs: []*store.RunUpdateParams{{ID: rid, Owner: "me", ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, StepDelta: 1}}})
				if err != nil {
					t.Errorf("append %s-%d: %v", sid, k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rw.Wait()
	if renewErr != nil {
		t.Fatal(renewErr)
	}
	commits, appends := f.st.GroupCommitStats()
	t.Logf("%d renewals during %d appends in %d commits", renewals, appends, commits)
}
