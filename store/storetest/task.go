package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// taskRun creates session s1 with a running run r1 of agent a.
func taskRun(t *testing.T, st store.Store) {
	t.Helper()
	mustSession(t, st, "s1")
	mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunRunning})
}

func newTask(id, key string) *store.Task {
	return &store.Task{ID: id, Key: key, Kind: "tool", Name: "refund", Agent: "a", AgentVersion: "v1", SessionID: "s1", RunID: "r1",
		StepID: "st-" + id, Attempt: 1, Input: json.RawMessage(`{"arguments":{"order":"A-1"}}`)}
}

func mustTask(t *testing.T, st store.Store, task *store.Task) *store.Task {
	t.Helper()
	got, err := st.TaskCreate(t.Context(), &store.TaskCreateParams{Task: task, Now: t0})
	if err != nil {
		t.Fatalf("TaskCreate(%s): %v", task.ID, err)
	}
	return got
}

func claimTasks(t *testing.T, st store.Store, owner string, limit int, now time.Time) []*store.Task {
	t.Helper()
	got, err := st.TaskClaim(t.Context(), &store.TaskClaimParams{Owner: owner, Agents: []string{"a"}, Lease: time.Minute, Limit: limit, Now: now})
	if err != nil {
		t.Fatalf("TaskClaim(%s): %v", owner, err)
	}
	return got
}

func taskIDs(ts []*store.Task) string {
	s := ""
	for i, x := range ts {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s/%d", x.ID, x.Token)
	}
	return s
}

func testTasks(t *testing.T, h *harness) {
	h.sub(t, "CreateIsIdempotentByKey", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		first := mustTask(t, st, newTask("t1", "k1"))
		if first.State != store.TaskQueued || first.Token != 0 || first.Claims != 0 || first.Key != "k1" || first.Agent != "a" ||
			string(first.Input) != `{"arguments":{"order":"A-1"}}` || !first.CreatedAt.Equal(t0) || first.StepID != "st-t1" || first.Attempt != 1 {
			t.Errorf("created task = %+v", first)
		}
		again, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t2", "k1"), Now: t0.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != "t1" {
			t.Errorf("second create with the same key returned %s, want the stored t1", again.ID)
		}
		claimTasks(t, st, "w1", 1, t0)
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 1, State: store.TaskCompleted, Result: json.RawMessage(`{"ok":true}`), Now: t0}); err != nil {
			t.Fatal(err)
		}
		done, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t3", "k1"), Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if done.ID != "t1" || done.State != store.TaskCompleted || string(done.Result) != `{"ok":true}` {
			t.Errorf("create after completion = %+v, want the completed t1 and its result", done)
		}
		byKey, err := st.TaskGet(ctx, &store.TaskGetParams{Key: "k1"})
		if err != nil || byKey.ID != "t1" {
			t.Errorf("TaskGet by key = %v, %v", byKey, err)
		}
		_, err = st.TaskGet(ctx, &store.TaskGetParams{ID: "t2"})
		wantErr(t, "the refused duplicate was not stored", err, store.ErrNotFound)
	})
	h.sub(t, "CreateRefusesBadInput", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		bad := newTask("t1", "k1")
		bad.RunID = "nope"
		_, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: bad})
		wantErr(t, "unknown run", err, store.ErrNotFound)
		noKey := newTask("t1", "")
		_, err = st.TaskCreate(ctx, &store.TaskCreateParams{Task: noKey})
		wantErr(t, "no key", err, store.ErrInvalid)
		notJSON := newTask("t1", "k1")
		notJSON.Input = json.RawMessage(`{`)
		_, err = st.TaskCreate(ctx, &store.TaskCreateParams{Task: notJSON})
		wantErr(t, "input not JSON", err, store.ErrInvalid)
		_, err = st.TaskGet(ctx, &store.TaskGetParams{ID: "t1"})
		wantErr(t, "nothing stored", err, store.ErrNotFound)
		_, err = st.TaskGet(ctx, &store.TaskGetParams{})
		wantErr(t, "get without id", err, store.ErrInvalid)
	})
	h.sub(t, "ClaimLeaseAndFencing", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		mustTask(t, st, newTask("t1", "k1"))
		got := claimTasks(t, st, "w1", 5, t0)
		if taskIDs(got) != "t1/1" || got[0].Owner != "w1" || got[0].State != store.TaskClaimed || got[0].Claims != 1 ||
			!got[0].LeaseExpires.Equal(t0.Add(time.Minute)) {
			t.Fatalf("first claim = %s %+v", taskIDs(got), got)
		}
		if again := claimTasks(t, st, "w2", 5, t0.Add(30*time.Second)); len(again) != 0 {
			t.Errorf("a leased task was claimed again: %s", taskIDs(again))
		}
		renewed, err := st.TaskRenew(ctx, &store.TaskRenewParams{ID: "t1", Token: 1, Lease: time.Minute, Now: t0.Add(50 * time.Second)})
		if err != nil || !renewed.LeaseExpires.Equal(t0.Add(110*time.Second)) {
			t.Fatalf("renew = %+v, %v", renewed, err)
		}
		if again := claimTasks(t, st, "w2", 5, t0.Add(100*time.Second)); len(again) != 0 {
			t.Errorf("a renewed task was claimed before its lease: %s", taskIDs(again))
		}
		taken := claimTasks(t, st, "w2", 5, t0.Add(111*time.Second))
		if taskIDs(taken) != "t1/2" || taken[0].Owner != "w2" || taken[0].Claims != 2 {
			t.Fatalf("claim after the lease = %s", taskIDs(taken))
		}
		_, err = st.TaskRenew(ctx, &store.TaskRenewParams{ID: "t1", Token: 1, Lease: time.Minute})
		wantErr(t, "renew with the old token", err, store.ErrConflict)
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 1, State: store.TaskCompleted, Result: json.RawMessage(`"late"`)})
		wantErr(t, "finish with the old token", err, store.ErrConflict)
		done, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 2, State: store.TaskCompleted, Result: json.RawMessage(`"second"`), Now: t0.Add(2 * time.Minute)})
		if err != nil || done.State != store.TaskCompleted || string(done.Result) != `"second"` || !done.FinishedAt.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("finish = %+v, %v", done, err)
		}
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 2, State: store.TaskFailed, Result: json.RawMessage(`"again"`)})
		wantErr(t, "finish twice", err, store.ErrConflict)
		if late := claimTasks(t, st, "w3", 5, t0.Add(time.Hour)); len(late) != 0 {
			t.Errorf("a finished task was claimed: %s", taskIDs(late))
		}
		stored, err := st.TaskGet(ctx, &store.TaskGetParams{ID: "t1"})
		if err != nil || string(stored.Result) != `"second"` || stored.Token != 2 || stored.Owner != "w2" {
			t.Errorf("stored = %+v, %v", stored, err)
		}
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: "nope", Token: 1, State: store.TaskCompleted})
		wantErr(t, "finish an unknown task", err, store.ErrNotFound)
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 2, State: "queued"})
		wantErr(t, "finish into a bad state", err, store.ErrInvalid)
	})
	h.sub(t, "ClaimFilters", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		mustRun(t, st, &steptype.Run{ID: "r2", SessionID: "s1", Agent: "a", Status: steptype.RunCancelled, Hop: 1, ParentRunID: "r1"})
		for i, name := range []string{"refund", "lookup", "refund"} {
			x := newTask(fmt.Sprintf("t%d", i+1), fmt.Sprintf("k%d", i+1))
			x.Name = name
			x.Kind = map[bool]string{true: "step", false: "tool"}[name == "lookup"]
			if _, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: x, Now: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		other := newTask("t4", "k4")
		other.Agent = "b"
		mustTask(t, st, other)
		dead := newTask("t5", "k5")
		dead.RunID = "r2"
		mustTask(t, st, dead)
		got, err := st.TaskClaim(ctx, &store.TaskClaimParams{Owner: "w", Agents: []string{"a"}, Names: []string{"refund"}, Lease: time.Minute, Limit: 10, Now: t0})
		if err != nil || taskIDs(got) != "t1/1 t3/1" {
			t.Errorf("claim of refund tasks = %s, %v; want t1 t3, oldest first", taskIDs(got), err)
		}
		if got := claimTasks(t, st, "w", 10, t0); taskIDs(got) != "t2/1" {
			t.Errorf("claim of agent a = %s, want t2 only (t5's run is cancelled, t4 is agent b's)", taskIDs(got))
		}
		_, err = st.TaskClaim(ctx, &store.TaskClaimParams{Owner: "w", Lease: time.Minute})
		wantErr(t, "claim without agents", err, store.ErrInvalid)
		tasks, err := st.TaskList(ctx, &store.TaskListParams{RunID: "r1"})
		if err != nil || len(tasks) != 4 {
			t.Errorf("TaskList(r1) = %d tasks, %v; want 4", len(tasks), err)
		}
	})
	h.sub(t, "Release", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		for i := 1; i <= 3; i++ {
			if _, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask(fmt.Sprintf("t%d", i), fmt.Sprintf("k%d", i)), Now: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		claimTasks(t, st, "w1", 2, t0)
		claimTasks(t, st, "w2", 1, t0)
		_, err := st.TaskRelease(ctx, &store.TaskReleaseParams{ID: "t3", Token: 7})
		wantErr(t, "release with a wrong token", err, store.ErrConflict)
		one, err := st.TaskRelease(ctx, &store.TaskReleaseParams{ID: "t3", Token: 1})
		if err != nil || taskIDs(one) != "t3/1" || one[0].State != store.TaskQueued {
			t.Errorf("release t3 = %s, %v", taskIDs(one), err)
		}
		all, err := st.TaskRelease(ctx, &store.TaskReleaseParams{Owner: "w1"})
		if err != nil || taskIDs(all) != "t1/1 t2/1" {
			t.Errorf("release w1 = %s, %v", taskIDs(all), err)
		}
		// Released tasks are offered at once, before their lease, with a new token.
		if got := claimTasks(t, st, "w3", 5, t0.Add(time.Second)); taskIDs(got) != "t1/2 t2/2 t3/2" {
			t.Errorf("claim after release = %s", taskIDs(got))
		}
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 1, State: store.TaskCompleted})
		wantErr(t, "finish by the releasing worker", err, store.ErrConflict)
		_, err = st.TaskRelease(ctx, &store.TaskReleaseParams{})
		wantErr(t, "release without id or owner", err, store.ErrInvalid)
	})
	h.sub(t, "ConcurrentClaimsLeaseOnce", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		const n = 20
		for i := range n {
			mustTask(t, st, newTask(fmt.Sprintf("t%02d", i), fmt.Sprintf("k%02d", i)))
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for {
					got, err := st.TaskClaim(ctx, &store.TaskClaimParams{Owner: fmt.Sprintf("w%d", w), Agents: []string{"a"}, Lease: time.Hour, Limit: 3})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, x := range got {
						seen[x.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Errorf("%d tasks claimed, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("task %s claimed %d times", id, c)
			}
		}
	})
	h.sub(t, "CreateClaimed", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		got, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t1", "k1"), Owner: "w1", Lease: time.Minute, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.TaskClaimed || got.Owner != "w1" || got.Token != 1 || got.Claims != 1 || !got.LeaseExpires.Equal(t0.Add(time.Minute)) ||
			!got.CreatedAt.Equal(t0) {
			t.Fatalf("created claimed = %+v", got)
		}
		if stored, err := st.TaskGet(ctx, &store.TaskGetParams{ID: "t1"}); err != nil || stored.State != store.TaskClaimed || stored.Token != 1 || stored.Owner != "w1" {
			t.Fatalf("stored = %+v, %v", stored, err)
		}
		if again := claimTasks(t, st, "w2", 5, t0.Add(30*time.Second)); len(again) != 0 {
			t.Fatalf("a task created claimed was claimed again under its lease: %s", taskIDs(again))
		}
		// The key is taken: the stored task, unchanged, whoever asks.
		dup, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t2", "k1"), Owner: "w2", Lease: time.Minute, Now: t0})
		if err != nil || dup.ID != "t1" || dup.Owner != "w1" || dup.Token != 1 {
			t.Fatalf("create of a taken key = %+v, %v", dup, err)
		}
		if taken := claimTasks(t, st, "w2", 5, t0.Add(61*time.Second)); taskIDs(taken) != "t1/2" {
			t.Fatalf("after the lease: claimed %s, want t1/2", taskIDs(taken))
		}
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 1, State: store.TaskCompleted}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("finish under the first token after another claim = %v, want ErrConflict", err)
		}
		_, err = st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t3", "k3"), Owner: "w1"})
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("create claimed without a lease = %v, want ErrInvalid", err)
		}
		if _, err := st.TaskGet(ctx, &store.TaskGetParams{ID: "t3"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a refused create stored its task: %v", err)
		}
	})
	h.sub(t, "Notifications", func(t *testing.T, st store.Store) {
		n := st.Notifier()
		if n == nil {
			t.Skip("the driver has no Notifier (Options.Notifier is false): tasks are announced in-process only")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := n.Listen(ctx, store.ChannelTasks)
		if err != nil {
			t.Fatal(err)
		}
		taskRun(t, st)
		marks := 0
		// upTo returns the payloads up to a marker sent now: what the
		// writes before it announced.
		upTo := func() []string {
			t.Helper()
			marks++
			mark := fmt.Sprintf("mark %d", marks)
			if err := n.Notify(ctx, store.ChannelTasks, mark); err != nil {
				t.Fatal(err)
			}
			var got []string
			timeout := time.After(10 * time.Second)
			for {
				select {
				case p := <-ch:
					if p == mark {
						return got
					}
					got = append(got, p)
				case <-timeout:
					t.Fatalf("no %q after %q", mark, got)
				}
			}
		}
		mustTask(t, st, newTask("t1", "k1"))
		if got := upTo(); !slices.Equal(got, []string{store.TaskQueuedChange("a")}) {
			t.Errorf("create: announced %q, want %q", got, store.TaskQueuedChange("a"))
		}
		mustTask(t, st, newTask("t2", "k1"))
		if got := upTo(); len(got) != 0 {
			t.Errorf("a create of a taken key announced %q, want nothing", got)
		}
		if _, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t9", "k9"), Owner: "w9", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if got := upTo(); len(got) != 0 {
			t.Errorf("a create claimed announced %q, want nothing (nobody may claim it)", got)
		}
		claimTasks(t, st, "w1", 1, time.Time{})
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 2, State: store.TaskCompleted}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("finish under a wrong token = %v, want ErrConflict", err)
		}
		if got := upTo(); len(got) != 0 {
			t.Errorf("a refused finish announced %q, want nothing", got)
		}
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 1, State: store.TaskCompleted}); err != nil {
			t.Fatal(err)
		}
		if got := upTo(); !slices.Equal(got, []string{store.TaskFinishedChange("t1")}) {
			t.Errorf("finish: announced %q, want %q", got, store.TaskFinishedChange("t1"))
		}
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t9", Token: 1, State: store.TaskCompleted, Quiet: true}); err != nil {
			t.Fatal(err)
		}
		if got := upTo(); len(got) != 0 {
			t.Errorf("a quiet finish announced %q, want nothing", got)
		}
	})
	h.sub(t, "ConcurrentFinishOneWins", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		mustTask(t, st, newTask("t1", "k1"))
		claimTasks(t, st, "w1", 1, t0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 8 {
			wg.Go(func() {
				_, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: 1, State: store.TaskCompleted, Result: json.RawMessage(fmt.Sprint(i))})
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else {
					wantErr(t, "losing finish", err, store.ErrConflict)
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Errorf("%d finishes won, want 1", wins)
		}
	})
	h.sub(t, "LazyCreateAndVisibleFinish", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		taskRun(t, st)
		c, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: newTask("t1", "k1"), Owner: "w1", Lease: time.Minute, Lazy: true, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := st.TaskGet(ctx, &store.TaskGetParams{Key: "k1"}); err != nil || got.State != store.TaskClaimed || got.Token != 1 {
			t.Fatalf("lazily created task = %+v, %v; want it claimed by w1 under token 1", got, err)
		}
		var seen []*store.Task
		visible := func(ft *store.Task) {
			// The finish is visible to other readers when Visible runs.
			got, err := st.TaskGet(ctx, &store.TaskGetParams{ID: ft.ID})
			if err != nil || got.State != store.TaskCompleted {
				t.Errorf("in Visible the stored task is %+v, %v; want it completed", got, err)
			}
			seen = append(seen, ft)
		}
		done, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: c.Token, State: store.TaskCompleted, Result: json.RawMessage(`"ok"`), Visible: visible})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != 1 || seen[0].State != store.TaskCompleted || string(seen[0].Result) != `"ok"` || done.State != store.TaskCompleted {
			t.Fatalf("Visible saw %d tasks (%+v), finish returned %+v; want the completed task once", len(seen), seen, done)
		}
		// A finish that does not commit is not visible.
		_, err = st.TaskFinish(ctx, &store.TaskFinishParams{ID: "t1", Token: c.Token, State: store.TaskFailed, Visible: visible})
		wantErr(t, "second finish", err, store.ErrConflict)
		if len(seen) != 1 {
			t.Errorf("Visible called for a refused finish")
		}
	})
}
