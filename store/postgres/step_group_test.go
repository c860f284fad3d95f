package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/internal/raceflag"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// A group's state is made at its size: checking and merging 30 appends
// (one step and one run update each, the benchmark's shape) allocates per
// append what the append itself needs (its body, its copies of the session
// and the run), not map growth.
func TestGroupApplyAllocations(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	const n = 30
	now := time.Now()
	reqs, sessions, runs := benchShapedGroup(t, n, now)
	group := func() {
		g, _, _, _ := newGroupState(reqs)
		for i := range n {
			g.sessions[sessions[i].ID], g.runs[runs[i].ID] = sessions[i], runs[i]
		}
		g.dbNow = nanos(now)
		for _, r := range reqs {
			if _, err := g.apply(r); err != nil {
				t.Fatal(err)
			}
		}
		g.release()
	}
	group()
	allocs := testing.AllocsPerRun(10, group)
	// Per append: about one, its notification (254 in all with maps grown
	// as they fill, 7.5 per append more with a map of its own ids per
	// append; 4 per append with its result and flags of its own, 7 with
	// its body spliced into a new slice and its copies allocated one by
	// one, 9 with the run's state and options copied). Per group: its
	// results' slab, not its maps, columns, ids and the slabs of its
	// copies, which a released group state brings (94 allocations in all
	// with new ones, 36 with new slabs of copies, 34 with new id slices,
	// 31 without).
	const limit = n + 3
	if allocs > limit {
		t.Errorf("a group of %d appends: %.0f allocations, want at most %d", n, allocs, limit)
	}
	t.Logf("a group of %d appends: %.0f allocations (%.1f per append)", n, allocs, allocs/n)
}

// TestGroupWritesAllocations: a group's write statements take their
// columns of sessions and runs from a released group state, like its
// steps' (18 allocations more for 30 appends when each group made its
// own), and write the same parameters as a new state.
func TestGroupWritesAllocations(t *testing.T) {
	const n = 30
	now := time.Now()
	reqs, sessions, runs := benchShapedGroup(t, n, now)
	var first [][]any
	check := true // compare the parameters with the first group's
	// applied is a group state of reqs, every request applied.
	applied := func() *groupState { return appliedGroup(t, reqs, sessions, runs, now) }
	group := func() {
		g := applied()
		b := g.writes("events")
		if first == nil {
			for _, q := range b.QueuedQueries {
				first = append(first, deepArgs(q.Arguments))
			}
		} else if check {
			for i, q := range b.QueuedQueries {
				args := deepArgs(q.Arguments)
				for j := range args {
					if q.SQL == groupWritesSQL && j == 6+10 {
						continue // updated_at: the clock's (rules.UpdateRun)
					}
					if !reflect.DeepEqual(args[j], first[i][j]) {
						t.Fatalf("statement %d, parameter %d:\n%#v\nfrom a released state, not\n%#v", i, j+1, args[j], first[i][j])
					}
				}
			}
		}
		g.release()
	}
	group()
	group()
	check = false
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	// writes alone: its batch and its statements, the notifications'
	// parameters; 68 with the columns boxed into new []any (15 + 6 + 12
	// slices in interfaces, 3 slices), 86 with columns of sessions and
	// runs made for each group.
	applyOnly := testing.AllocsPerRun(10, func() {
		applied().release()
	})
	allocs := testing.AllocsPerRun(10, group) - applyOnly
	const limit = 14
	if allocs > limit {
		t.Errorf("the writes of a group of %d appends: %.0f allocations, want at most %d", n, allocs, limit)
	}
	t.Logf("the writes of a group of %d appends: %.0f allocations", n, allocs)
}

// TestGroupWritesOneStatement: a group of many sessions and runs, or of
// one of each (a lone append), writes them, with its notifications, in one
// statement besides its insert (groupWritesSQL, loneWritesSQL), with the
// parameters the three statements it replaces take (those a group without
// a channel still sends).
func TestGroupWritesOneStatement(t *testing.T) {
	for _, tc := range []struct {
		n                 int
		one, sess, runs   string
		runUpdatedAtIndex int
		fold              string
	}{
		{30, groupWritesSQL, sessionTotalsManySQL, runUpdateManySQL, 10, statsFoldManySQL},
		{1, loneWritesSQL, sessionTotalsSQL, runUpdateSQL, 9, statsFoldSQL},
	} {
		n := tc.n
		now := time.Now()
		reqs, sessions, runs := benchShapedGroup(t, n, now)
		writes := func(channel string) (*pgx.Batch, []string) {
			g := appliedGroup(t, reqs, sessions, runs, now)
			b := g.writes(channel)
			// deep copies: the columns go back with the state; the fold of
			// the rollups every rollupFoldEvery groups left out
			b.QueuedQueries = slices.DeleteFunc(b.QueuedQueries, func(q *pgx.QueuedQuery) bool { return q.SQL == rollupFoldSQL })
			for _, q := range b.QueuedQueries {
				q.Arguments = deepArgs(q.Arguments)
			}
			payloads := slices.Clone(g.payloads)
			g.release()
			return b, payloads
		}
		one, payloads := writes("events")
		apart, _ := writes("")
		if len(one.QueuedQueries) != 3 || one.QueuedQueries[0].SQL != stepGroupInsertSQL || one.QueuedQueries[1].SQL != tc.fold ||
			one.QueuedQueries[2].SQL != tc.one {
			for _, q := range one.QueuedQueries {
				t.Log(q.SQL)
			}
			t.Fatalf("a group of %d appends wrote with %d statements, want the insert, the totals' fold and\n%s", n, len(one.QueuedQueries), tc.one)
		}
		if len(apart.QueuedQueries) != 4 || apart.QueuedQueries[2].SQL != tc.sess || apart.QueuedQueries[3].SQL != tc.runs {
			t.Fatalf("%d appends without a channel: %d statements, want the insert, the fold and the sessions' and runs' updates", n, len(apart.QueuedQueries))
		}
		want := append(append(slices.Clone(apart.QueuedQueries[2].Arguments), apart.QueuedQueries[3].Arguments...), "events", payloads)
		got := one.QueuedQueries[2].Arguments
		if len(got) != len(want) || len(want) != 20 || len(payloads) != n {
			t.Fatalf("%d appends: %d parameters, want %d (20); %d payloads, want %d", n, len(got), len(want), len(payloads), n)
		}
		for j := range got {
			if j == 6+tc.runUpdatedAtIndex {
				continue // updated_at: the clock's (rules.UpdateRun)
			}
			if !reflect.DeepEqual(got[j], want[j]) {
				t.Errorf("%d appends, parameter %d:\n%#v\nwant\n%#v", n, j+1, got[j], want[j])
			}
		}
	}
	for _, sql := range []string{groupWritesSQL, loneWritesSQL} {
		if !strings.Contains(sql, "$7") || !strings.Contains(sql, "$18") || strings.Contains(sql, "$21") {
			t.Errorf("the runs' parameters are not numbered after the sessions':\n%s", sql)
		}
	}
}

// deepArgs copies a statement's parameters (the columns are reused), a
// pointer to a column as the column.
func deepArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if v := reflect.ValueOf(a); v.Kind() == reflect.Pointer && !v.IsNil() {
			a = v.Elem().Interface()
		}
		switch v := a.(type) {
		case []string:
			out[i] = slices.Clone(v)
		case []int64:
			out[i] = slices.Clone(v)
		case []float64:
			out[i] = slices.Clone(v)
		case []int32:
			out[i] = slices.Clone(v)
		case [][]byte:
			c := make([][]byte, len(v))
			for j, x := range v {
				c[j] = slices.Clone(x)
			}
			out[i] = c
		default:
			out[i] = a
		}
	}
	return out
}

// appliedGroup is a group state of reqs on copies of sessions and runs
// (benchShapedGroup's), the database clock at now, every request applied.
func appliedGroup(t *testing.T, reqs []*appendReq, sessions []*steptype.Session, runs []*steptype.Run, now time.Time) *groupState {
	t.Helper()
	g, _, _, _ := newGroupState(reqs)
	for i := range sessions {
		s, r := *sessions[i], *runs[i]
		g.sessions[s.ID], g.runs[r.ID] = &s, &r
	}
	g.dbNow = nanos(now)
	for _, r := range reqs {
		if _, err := g.apply(r); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// benchShapedGroup returns n appends of one step and one run update each
// (the benchmark's shape), on their own sessions and runs.
func benchShapedGroup(t *testing.T, n int, now time.Time) ([]*appendReq, []*steptype.Session, []*steptype.Run) {
	t.Helper()
	running := []steptype.RunStatus{steptype.RunRunning}
	cursor := "c"
	reqs := make([]*appendReq, n)
	sessions := make([]*steptype.Session, n)
	runs := make([]*steptype.Run, n)
	for i := range reqs {
		sid, rid := fmt.Sprintf("session-%02d", i), fmt.Sprintf("run-%02d", i)
		st := &steptype.Step{ID: fmt.Sprintf("step-%02d", i), SessionID: sid, RunID: rid, Kind: steptype.KindTool,
			Status: steptype.StepCompleted, Content: "result"}
		pe, err := rules.PreEncode(st, now)
		if err != nil {
			t.Fatal(err)
		}
		p := &store.StepAppendParams{Steps: []*steptype.Step{st},
			Runs: []*store.RunUpdateParams{{ID: rid, Owner: "me", ExpectStatus: running, Cursor: &cursor, StepDelta: 1}}}
		reqs[i] = &appendReq{ctx: context.Background(), p: p, pre: []*rules.PreEncoded{pe}, now: now}
		sessions[i] = &steptype.Session{ID: sid, LastSequence: int64(i)}
		runs[i] = &steptype.Run{ID: rid, SessionID: sid, Status: steptype.RunRunning, LeaseOwner: "me", LeaseExpires: now.Add(time.Hour),
			State: json.RawMessage(`{"n":1}`), Options: json.RawMessage(`{"limits":{}}`)}
	}
	return reqs, sessions, runs
}

// A group's context costs one registration at a time (groupWatch), not
// one per append (context.AfterFunc on each: 67 allocations for 30
// appends; 96 with a closure more each), and still ends only when every
// append's context has ended, in whatever order they end.
func TestGroupContextAllocations(t *testing.T) {
	const n = 30
	for name, order := range map[string]func(i int) int{
		"in order":    func(i int) int { return i },
		"reversed":    func(i int) int { return n - 1 - i },
		"interleaved": func(i int) int { return (i * 7) % n },
	} {
		reqs := make([]*appendReq, n)
		cancels := make([]context.CancelFunc, n)
		for i := range reqs {
			ctx, cancel := context.WithCancel(context.Background())
			reqs[i], cancels[i] = &appendReq{ctx: ctx}, cancel
		}
		cancels[3]() // ended before the group began
		ctx, stop := groupContext(reqs)
		for i := range n - 1 {
			cancels[order(i)]()
			time.Sleep(time.Millisecond / 10) // a watcher may move on meanwhile
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: the group's context ended while an append still waited", name)
		}
		cancels[order(n-1)]()
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatalf("%s: the group's context did not end with the last append's", name)
		}
		stop()
	}
	// Stopped, a group's context ends and watches nothing more.
	reqs := make([]*appendReq, n)
	cancels := make([]context.CancelFunc, n)
	for i := range reqs {
		ctx, cancel := context.WithCancel(context.Background())
		reqs[i], cancels[i] = &appendReq{ctx: ctx}, cancel
	}
	ctx, stop := groupContext(reqs)
	stop()
	if ctx.Err() == nil {
		t.Fatal("a stopped group's context has not ended")
	}
	for _, cancel := range cancels {
		cancel()
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	for i := range reqs {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		reqs[i].ctx = ctx
	}
	allocs := testing.AllocsPerRun(20, func() {
		_, stop := groupContext(reqs)
		stop()
	})
	if allocs > 10 {
		t.Errorf("the context of a group of %d appends: %.0f allocations, want at most 10", n, allocs)
	}
	t.Logf("the context of a group of %d appends: %.0f allocations", n, allocs)
}

// An append that re-appends a step id an earlier append of its group
// inserted returns that step as stored, from a copy of its body: the
// earlier append's body is written in its pre-encoded buffer (Sequenced),
// which it gives back once answered and the next append encodes into,
// maybe before the later append has decoded its answer.
func TestGroupReappendKeepsItsBody(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(content string) *steptype.Step {
		return &steptype.Step{ID: "step-1", SessionID: "session-1", Kind: steptype.KindTool, Status: steptype.StepCompleted, Content: content}
	}
	req := func(st *steptype.Step) *appendReq {
		pe, err := rules.PreEncode(st, now)
		if err != nil {
			t.Fatal(err)
		}
		return &appendReq{ctx: context.Background(), p: &store.StepAppendParams{Steps: []*steptype.Step{st}},
			pre: []*rules.PreEncoded{pe}, now: now}
	}
	first, again := req(step("first")), req(step("again"))
	g, _, _, _ := newGroupState([]*appendReq{first, again})
	g.sessions["session-1"] = &steptype.Session{ID: "session-1", LastSequence: 4}
	if _, err := g.apply(first); err != nil {
		t.Fatal(err)
	}
	out, err := g.apply(again)
	if err != nil {
		t.Fatal(err)
	}
	placed := *step("first")
	placed.Sequence, placed.CreatedAt = 5, now
	want, _ := rules.EncodeStep(&placed)
	// The first append is answered and releases its buffer; the next
	// append encodes into it.
	first.pre[0].Release()
	next, err := rules.PreEncode(&steptype.Step{ID: "step-2", SessionID: "session-2", Kind: steptype.KindUser,
		Status: steptype.StepCompleted, Content: "a longer content that overwrites the buffer"}, now)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	if _, err := next.Sequenced(77); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].pre != nil || !bytes.Equal(out[0].body, want) {
		t.Fatalf("the re-append's answer:\n got %s\nwant %s", out[0].body, want)
	}
}

// A queued append waits on a channel from a pool, given back once it has
// received its one message: queueing costs no allocation (one channel per
// queued append before).
func TestQueuedAppendWaitAllocatesNothing(t *testing.T) {
	req := &appendReq{}
	req.wake = newWake()
	req.wake <- []*appendReq{req}
	if got := req.wait(); len(got) != 1 || got[0] != req || req.wake != nil {
		t.Fatalf("wait returned %v, wake %v", got, req.wake)
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	allocs := testing.AllocsPerRun(100, func() {
		req.wake = newWake()
		req.wake <- nil
		if req.wait() != nil {
			t.Fatal("a nil message changed")
		}
	})
	if allocs > 0 {
		t.Errorf("queueing and waking an append: %.0f allocations, want none", allocs)
	}
}

// With InPlace an append whose every step is returned itself gets the
// given slice back (no slice made); a step returned as a copy (stored
// already) makes a new one, with the given steps before it.
func TestPlacedStepsReturnGivenSlice(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	given := make([]*steptype.Step, 3)
	placed := make([]appended, 3)
	for i := range given {
		given[i] = &steptype.Step{ID: fmt.Sprintf("step-%d", i), SessionID: "s", Kind: steptype.KindTool, Status: steptype.StepCompleted, Content: "x"}
		pe, err := rules.PreEncode(given[i], now)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := pe.Sequenced(int64(i + 1))
		placed[i] = appended{pre: pe, seq: int64(i + 1), body: body}
	}
	out, err := placedSteps(placed, given, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || &out[0] != &given[0] || out[2].Sequence != 3 {
		t.Fatalf("every step returned itself: got a new slice %v (or a wrong step)", out)
	}
	if !raceflag.Enabled {
		if allocs := testing.AllocsPerRun(20, func() { _, _ = placedSteps(placed, given, true) }); allocs > 0 {
			t.Errorf("returning 3 steps in place: %.0f allocations, want none", allocs)
		}
	}
	stored := placed[1]
	stored.pre = nil // an id stored already: its body decoded
	out, err = placedSteps([]appended{placed[0], stored, placed[2]}, given, true)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] == &given[0] || out[0] != given[0] || out[1] == given[1] || out[1].ID != "step-1" || out[2] != given[2] {
		t.Fatalf("a re-appended step in the middle: got %v, given %v", out, given)
	}
	if given[1] == out[1] {
		t.Fatal("the given slice was changed")
	}
}

// A StepAppend's request, and its slice of pre-encoded steps, serve the
// next call once answered (2 allocations per append before), emptied:
// nothing of the previous call is left in it.
func TestAppendReqReusedEmpty(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &store.StepAppendParams{Steps: []*steptype.Step{{ID: "a", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted}}}
	r := newAppendReq(context.Background(), p, now)
	pe, err := rules.PreEncode(p.Steps[0], now)
	if err != nil {
		t.Fatal(err)
	}
	r.pre[0], r.out, r.err = pe, []appended{{seq: 1}}, errNothingToCommit
	r.release()
	for range 3 {
		q := newAppendReq(context.Background(), p, now)
		if len(q.pre) != 1 || q.pre[0] != nil || q.out != nil || q.err != nil || q.wake != nil || q.p != p {
			t.Fatalf("a reused request keeps the previous call's: pre %v, out %v, err %v", q.pre, q.out, q.err)
		}
		q.release()
	}
	if raceflag.Enabled {
		return // allocation counts are checked without -race (scripts/test)
	}
	if allocs := testing.AllocsPerRun(100, func() { newAppendReq(context.Background(), p, now).release() }); allocs > 0 {
		t.Errorf("a StepAppend's request: %.0f allocations, want none", allocs)
	}
}

// A released group state serves the next group, unless it held more than
// maxPooledGroup steps: clearing its maps would cost every later group
// their capacity.
func TestHugeGroupStateNotKept(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	reqs := []*appendReq{{p: &store.StepAppendParams{Steps: []*steptype.Step{{ID: "a", SessionID: "s"}}}}}
	g, _, _, _ := newGroupState(reqs)
	g.release()
	if again, _, _, _ := newGroupState(reqs); again != g {
		t.Fatal("a released group state was not reused")
	}
	huge, _, _, _ := newGroupState(reqs)
	for i := range maxPooledGroup + 1 {
		huge.stored[fmt.Sprint(i)] = nil
	}
	huge.release()
	if again, _, _, _ := newGroupState(reqs); again == huge {
		t.Fatal("a group state of more than maxPooledGroup steps was kept")
	}
}

// TestGroupLockBatch: a group's lock batch is made of its state's own
// parts (lockParts), so that a released state's costs no allocation (the
// batch built with pgx.Batch.Queue and closures per group made 32 for this
// group), and holds the statements, in order, with the group's ids.
func TestGroupLockBatch(t *testing.T) {
	const n = 30
	reqs, _, _ := benchShapedGroup(t, n, time.Now())
	g, sessionIDs, stepIDs, runIDs := newGroupState(reqs)
	defer g.release()
	b := g.lockBatch()
	want := []struct {
		sql  string
		arg  []string
		read bool
	}{
		{lockSettingsSQL, nil, false},
		{lockSessionsSQL, sessionIDs, true},
		{lockRunsSQL, runIDs, true},
		{lockReadsSQL, append(slices.Clone(stepIDs), runIDs...), true},
		{lockClockSQL, nil, true},
	}
	if len(b.QueuedQueries) != len(want) {
		t.Fatalf("%d statements, want %d", len(b.QueuedQueries), len(want))
	}
	for i, q := range b.QueuedQueries {
		w := want[i]
		var arg []string
		for _, a := range q.Arguments {
			arg = append(arg, *a.(*[]string)...)
		}
		if q.SQL != w.sql || !slices.Equal(arg, w.arg) || (q.Fn != nil) != w.read {
			t.Errorf("statement %d: %q %v (callback %v), want %q %v (%v)", i, q.SQL, arg, q.Fn != nil, w.sql, w.arg, w.read)
		}
	}
	if len(sessionIDs) != n || len(runIDs) != n || !slices.IsSorted(sessionIDs) || !slices.IsSorted(runIDs) {
		t.Errorf("ids: %d sessions, %d runs, sorted %v %v", len(sessionIDs), len(runIDs), slices.IsSorted(sessionIDs), slices.IsSorted(runIDs))
	}
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	allocs := testing.AllocsPerRun(10, func() {
		g.lock.reset()
		g.lockBatch()
	})
	if allocs > 0 {
		t.Errorf("a group's lock batch: %.0f allocations, want none", allocs)
	}
}

// shiftParams renumbers every parameter, of any number of digits, and
// nothing else (a $ without digits, the text around).
func TestShiftParams(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT $1, $2 FROM t WHERE id = ANY($10::text[])`: `SELECT $7, $8 FROM t WHERE id = ANY($16::text[])`,
		`SELECT '$' || x, $9`:                              `SELECT '$' || x, $15`,
		`$3`:                                               `$9`,
	} {
		if got := shiftParams(in, 6); got != want {
			t.Errorf("shiftParams(%q, 6) = %q, want %q", in, got, want)
		}
	}
	if got := lockReadsSQL; !strings.Contains(got, "run_id = ANY($2) AND status = 'waiting'") {
		t.Errorf("lockReadsSQL reads the waiting steps by $1:\n%s", got)
	}
}
