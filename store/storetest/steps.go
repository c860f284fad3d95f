package storetest

import (
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

// fullStep sets every wire field, to prove the store keeps all of them.
func fullStep(sessionID, id string) *steptype.Step {
	return &steptype.Step{
		ID: id, SessionID: sessionID, RunID: "run-x", ParentID: "prev", Hop: 2,
		Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted,
		Role: steptype.RoleAssistant, Content: "hello ✓", Reasoning: "because",
		ToolCalls:  []steptype.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"x"}`)}},
		ToolCallID: "tc", ToolName: "tn",
		Inputs: json.RawMessage(`{"in":1}`), Outputs: json.RawMessage(`[1,2]`), StatePatch: json.RawMessage(`{"a":null}`),
		Error: &steptype.StepError{Message: "m", Cause: "c", Class: steptype.ErrorTransient, Attempt: 2, Recoverable: true, Code: "timeout"},
		Metrics: steptype.Metrics{
			StartedAt: t0, FinishedAt: t0.Add(time.Second), Duration: 1500 * time.Microsecond,
			FirstTokenLatency: 7 * time.Microsecond, InputTokens: 11, OutputTokens: 12, CachedTokens: 3,
			ReasoningTokens: 4, Cost: 0.125, Model: "m1", Provider: "p1", Attempt: 2,
		},
		Annotations: steptype.Annotations{State: "s", Goal: "g", Action: "a", ActionSummary: "as"},
		Vector:      []float32{0.5, -1},
		Embedder:    "e", Replay: "live", Fingerprint: "fp",
		Metadata:  map[string]any{"k": "v", "n": 1.5, "nested": map[string]any{"b": true}},
		CreatedAt: t0,
	}
}

func testSteps(t *testing.T, h *harness) {
	testAppendInPlace(t, h)
	h.sub(t, "AppendRoundTrip", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		in := fullStep("s1", "x1")
		got := mustAppend(t, st, in)[0]
		want := *in
		want.Sequence = 1
		sameJSON(t, "returned", got, &want)
		byID, err := st.StepGet(t.Context(), &store.StepGetParams{ID: "x1"})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "StepGet", byID, &want)
		if in.Sequence != 0 {
			t.Errorf("StepAppend changed the caller's step: sequence %d", in.Sequence)
		}
	})
	h.sub(t, "AppendIsolation", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		in := fullStep("s1", "x1")
		got := mustAppend(t, st, in)[0]
		in.Content, in.Metadata["k"], in.ToolCalls[0].Name = "changed", "changed", "changed"
		got.Content, got.Metadata["k"], got.ToolCalls[0].Name = "changed", "changed", "changed"
		again, err := st.StepGet(t.Context(), &store.StepGetParams{ID: "x1"})
		if err != nil {
			t.Fatal(err)
		}
		if again.Content != "hello ✓" || again.Metadata["k"] != "v" || again.ToolCalls[0].Name != "search" {
			t.Errorf("stored step changed through a caller's pointer: %+v", again)
		}
	})
	h.sub(t, "AppendDefaultsCreatedAt", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		before := time.Now().Add(-time.Second)
		got := fill(t, st, "s1", "x", 1)[0]
		if got.CreatedAt.Before(before) {
			t.Errorf("CreatedAt %v, want about now", got.CreatedAt)
		}
	})
	h.sub(t, "AppendBatch", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		mustSession(t, st, "s2")
		fill(t, st, "s2", "y", 2)
		got, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{
			newStep("s1", "a"), newStep("s2", "b"), newStep("s1", "c"),
		}})
		if err != nil {
			t.Fatal(err)
		}
		wantView(t, "batch", got, "s1/1/a s2/3/b s1/2/c")
	})
	h.sub(t, "AppendConcurrentGapFree", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		n, per := h.opts.Concurrency, h.opts.PerGoroutine
		var wg sync.WaitGroup
		errs := make(chan error, n)
		seqs := make([][]int64, n)
		for g := range n {
			wg.Go(func() {
				for i := range per {
					got, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{newStep("s1", fmt.Sprintf("g%d-%d", g, i))}})
					if err != nil {
						errs <- err
						return
					}
					seqs[g] = append(seqs[g], got[0].Sequence)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("concurrent append: %v", err)
		}
		for g, s := range seqs {
			if !slices.IsSorted(s) {
				t.Errorf("goroutine %d got sequences out of order: %v", g, s)
			}
		}
		all := list(t, st, &store.StepListParams{SessionID: "s1"})
		ids := map[string]bool{}
		for i, s := range all {
			if s.Sequence != int64(i+1) {
				t.Fatalf("step %d has sequence %d: gap or duplicate", i, s.Sequence)
			}
			ids[s.ID] = true
		}
		if len(all) != n*per || len(ids) != n*per {
			t.Errorf("%d steps, %d distinct ids, want %d", len(all), len(ids), n*per)
		}
		if last := getSession(t, st, "s1").LastSequence; last != int64(n*per) {
			t.Errorf("LastSequence %d, want %d", last, n*per)
		}
	})
	h.sub(t, "AppendConcurrentWithFailures", func(t *testing.T, st store.Store) {
		// Half of the appends carry a run update with the wrong owner and
		// must fail alone: the others commit, gap-free, in the same batches.
		mustSession(t, st, "s1")
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunRunning, LeaseOwner: "w"})
		n := 2 * h.opts.Concurrency
		var wg sync.WaitGroup
		results := make([]error, n)
		for g := range n {
			wg.Go(func() {
				owner := "w"
				if g%2 == 1 {
					owner = "intruder"
				}
				_, results[g] = st.StepAppend(t.Context(), &store.StepAppendParams{
					Steps: []*steptype.Step{newStep("s1", fmt.Sprint("x", g))},
					Runs:  []*store.RunUpdateParams{{ID: "r1", Owner: owner, StepDelta: 1}},
				})
			})
		}
		wg.Wait()
		for g, err := range results {
			if g%2 == 0 && err != nil {
				t.Errorf("append %d: %v", g, err)
			}
			if g%2 == 1 {
				wantErr(t, fmt.Sprint("append ", g), err, store.ErrConflict)
			}
		}
		all := list(t, st, &store.StepListParams{SessionID: "s1"})
		for i, s := range all {
			var g int
			fmt.Sscanf(s.ID, "x%d", &g)
			if s.Sequence != int64(i+1) || g%2 == 1 {
				t.Errorf("step %d: %s at sequence %d", i, s.ID, s.Sequence)
			}
		}
		if len(all) != n/2 {
			t.Errorf("%d steps stored, want %d", len(all), n/2)
		}
		if r := getRun(t, st, "r1"); r.StepCount != int64(n/2) {
			t.Errorf("run StepCount %d, want %d", r.StepCount, n/2)
		}
	})
	h.sub(t, "AppendIdempotent", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		first := fill(t, st, "s1", "x", 1)[0]
		dup := newStep("s1", "x-1")
		dup.Content = "second"
		got := mustAppend(t, st, dup)[0]
		sameJSON(t, "duplicate append returns the stored row", got, first)
		again, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{newStep("s1", "y"), newStep("s1", "y")}})
		if err != nil {
			t.Fatal(err)
		}
		wantView(t, "same id twice in a batch", again, "s1/2/y s1/2/y")
		wantView(t, "stored", list(t, st, &store.StepListParams{SessionID: "s1"}), "s1/1/x-1 s1/2/y")
		// A retried explicit-sequence append is idempotent too.
		retry := newStep("s1", "y")
		retry.Sequence = 2
		if got := mustAppend(t, st, retry)[0]; got.Sequence != 2 {
			t.Errorf("retried explicit append: sequence %d", got.Sequence)
		}
	})
	h.sub(t, "ReappendCountsOnce", func(t *testing.T, st store.Store) {
		// The run's step count follows the steps actually inserted: a
		// re-append of a committed step (a commit retried after a lost
		// reply) counts nothing twice.
		mustSession(t, st, "s1")
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a", Status: steptype.RunRunning, LeaseOwner: "w"})
		step := func(id string) *steptype.Step {
			s := newStep("s1", id)
			s.RunID = "r1"
			return s
		}
		appendRun := func(delta int64, steps ...*steptype.Step) {
			t.Helper()
			if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: steps,
				Runs: []*store.RunUpdateParams{{ID: "r1", Owner: "w", StepDelta: delta}}}); err != nil {
				t.Fatal(err)
			}
		}
		appendRun(1, step("a"))
		appendRun(1, step("a"))
		appendRun(2, step("a"), step("b"))
		appendRun(2, step("c"), step("c"))
		if r := getRun(t, st, "r1"); r.StepCount != 3 {
			t.Errorf("StepCount %d after re-appends, want 3 (a, b, c)", r.StepCount)
		}
		wantView(t, "stored", list(t, st, &store.StepListParams{SessionID: "s1"}), "s1/1/a s1/2/b s1/3/c")
	})
	h.sub(t, "AppendExplicitSequence", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		ok := newStep("s1", "a")
		ok.Sequence = 1
		mustAppend(t, st, ok)
		good, bad := newStep("s1", "b"), newStep("s1", "c")
		bad.Sequence = 5
		_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{good, bad}})
		wantErr(t, "sequence not next", err, store.ErrConflict)
		taken := newStep("s1", "d")
		taken.Sequence = 1
		_, err = st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{taken}})
		wantErr(t, "sequence taken", err, store.ErrConflict)
		wantView(t, "after conflicts", list(t, st, &store.StepListParams{SessionID: "s1"}), "s1/1/a")
		if s := getSession(t, st, "s1"); s.LastSequence != 1 {
			t.Errorf("LastSequence %d after a failed append", s.LastSequence)
		}
	})
	h.sub(t, "AppendInvalid", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		bad := func(mut func(*steptype.Step)) *steptype.Step { s := newStep("s1", "b"); mut(s); return s }
		for name, c := range map[string]struct {
			s    *steptype.Step
			want error
		}{
			"no id":           {bad(func(s *steptype.Step) { s.ID = "" }), store.ErrInvalid},
			"no session":      {bad(func(s *steptype.Step) { s.SessionID = "" }), store.ErrInvalid},
			"unknown kind":    {bad(func(s *steptype.Step) { s.Kind = "bogus" }), store.ErrInvalid},
			"unknown status":  {bad(func(s *steptype.Step) { s.Status = "" }), store.ErrInvalid},
			"negative seq":    {bad(func(s *steptype.Step) { s.Sequence = -1 }), store.ErrInvalid},
			"unknown session": {bad(func(s *steptype.Step) { s.SessionID = "nope" }), store.ErrNotFound},
		} {
			_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{newStep("s1", "ok"), c.s}})
			wantErr(t, name, err, c.want)
		}
		if n, _ := st.StepCount(ctx, &store.StepCountParams{SessionID: "s1"}); n != 0 {
			t.Errorf("%d steps written by failed appends", n)
		}
	})
	h.sub(t, "ListRange", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		steps := fill(t, st, "s1", "x", 10)
		tool := newStep("s1", "t11")
		tool.Kind, tool.Role = steptype.KindTool, steptype.RoleTool
		steps = append(steps, mustAppend(t, st, tool)...)
		for _, c := range []struct {
			p    store.StepListParams
			want []int64
		}{
			{store.StepListParams{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
			{store.StepListParams{StartSeq: 3, EndSeq: 5}, []int64{3, 4, 5}},
			{store.StepListParams{StartSeq: 10}, []int64{10, 11}},
			{store.StepListParams{EndSeq: 2}, []int64{1, 2}},
			{store.StepListParams{StartSeq: 4, EndSeq: 4}, []int64{4}},
			{store.StepListParams{StartSeq: 5, EndSeq: 4}, nil},
			{store.StepListParams{StartSeq: 12}, nil},
			{store.StepListParams{Limit: 3}, []int64{1, 2, 3}},
			{store.StepListParams{Desc: true, Limit: 3}, []int64{11, 10, 9}},
			{store.StepListParams{Desc: true, StartSeq: 2, EndSeq: 4}, []int64{4, 3, 2}},
			{store.StepListParams{Kinds: []steptype.Kind{steptype.KindTool}}, []int64{11}},
			{store.StepListParams{Kinds: []steptype.Kind{steptype.KindTool, steptype.KindUser}, StartSeq: 10}, []int64{10, 11}},
		} {
			p := c.p
			p.SessionID = "s1"
			var got []int64
			for _, s := range list(t, st, &p) {
				got = append(got, s.Sequence)
				sameJSON(t, "listed step", s, steps[s.Sequence-1])
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("StepList(%+v) = %v, want %v", c.p, got, c.want)
			}
		}
	})
	h.sub(t, "ListByRunAndStatus", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		mustSession(t, st, "s2")
		mk := func(sess, id, run string, status steptype.StepStatus) *steptype.Step {
			s := newStep(sess, id)
			s.RunID, s.Status = run, status
			return s
		}
		mustAppend(t, st, mk("s1", "a", "r1", steptype.StepCompleted), mk("s1", "b", "r2", steptype.StepWaiting),
			mk("s1", "c", "r1", steptype.StepWaiting), mk("s2", "d", "r3", steptype.StepWaiting), mk("s1", "e", "r1", steptype.StepCompleted))
		wantView(t, "by run", list(t, st, &store.StepListParams{RunID: "r1"}), "s1/1/a s1/3/c s1/4/e")
		wantView(t, "by run desc", list(t, st, &store.StepListParams{RunID: "r1", Desc: true, Limit: 2}), "s1/4/e s1/3/c")
		wantView(t, "by run and status", list(t, st, &store.StepListParams{RunID: "r1", Status: steptype.StepWaiting}), "s1/3/c")
		wantView(t, "waiting everywhere", list(t, st, &store.StepListParams{Status: steptype.StepWaiting}), "s2/1/d s1/2/b s1/3/c")
		wantView(t, "waiting in s1", list(t, st, &store.StepListParams{SessionID: "s1", Status: steptype.StepWaiting}), "s1/2/b s1/3/c")
	})
	h.sub(t, "GetLastCount", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		_, err := st.StepLast(ctx, &store.StepLastParams{SessionID: "s1"})
		wantErr(t, "last of empty session", err, store.ErrNotFound)
		if n, err := st.StepCount(ctx, &store.StepCountParams{SessionID: "s1"}); err != nil || n != 0 {
			t.Errorf("count of empty session = %d, %v", n, err)
		}
		steps := fill(t, st, "s1", "x", 4)
		last, err := st.StepLast(ctx, &store.StepLastParams{SessionID: "s1"})
		if err != nil || last.ID != "x-4" {
			t.Errorf("StepLast = %v, %v", last, err)
		}
		if n, err := st.StepCount(ctx, &store.StepCountParams{SessionID: "s1"}); err != nil || n != 4 {
			t.Errorf("StepCount = %d, %v", n, err)
		}
		at, err := st.StepGet(ctx, &store.StepGetParams{SessionID: "s1", Sequence: 3})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "StepGet by sequence", at, steps[2])
		_, err = st.StepGet(ctx, &store.StepGetParams{SessionID: "s1", Sequence: 5})
		wantErr(t, "sequence beyond the end", err, store.ErrNotFound)
		_, err = st.StepGet(ctx, &store.StepGetParams{SessionID: "s1", Sequence: 0})
		if !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("sequence 0: err = %v, want ErrInvalid or ErrNotFound", err)
		}
	})
	h.sub(t, "AppendWithRunUpdate", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "s1")
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "s1", Agent: "a"})
		claimed, err := st.RunClaim(ctx, &store.RunClaimParams{Owner: "w1", Lease: time.Minute, Now: t0})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %v", claimed, err)
		}
		s := newStep("s1", "x1")
		s.RunID, s.StatePatch = "r1", json.RawMessage(`{"n":1}`)
		_, err = st.StepAppend(ctx, &store.StepAppendParams{
			Steps: []*steptype.Step{s},
			Runs: []*store.RunUpdateParams{{ID: "r1", Owner: "w1", ExpectStatus: []steptype.RunStatus{steptype.RunRunning},
				Cursor: ptr("tools"), State: json.RawMessage(`{"n":1}`), StepDelta: 1, Now: t0.Add(time.Second)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r := getRun(t, st, "r1")
		if r.Cursor != "tools" || string(r.State) != `{"n":1}` || r.StepCount != 1 || !r.UpdatedAt.Equal(t0.Add(time.Second)) {
			t.Errorf("run after append = %+v", r)
		}
		for name, u := range map[string]*store.RunUpdateParams{
			"wrong owner":      {ID: "r1", Owner: "w2", Cursor: ptr("x"), StepDelta: 1},
			"wrong status":     {ID: "r1", ExpectStatus: []steptype.RunStatus{steptype.RunQueued}, Cursor: ptr("x")},
			"unknown run":      {ID: "nope", Cursor: ptr("x")},
			"invalid status":   {ID: "r1", Status: ptr(steptype.RunStatus("bogus"))},
			"invalid run json": {ID: "r1", State: json.RawMessage(`{`)},
		} {
			_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{newStep("s1", "x2")}, Runs: []*store.RunUpdateParams{u}})
			want := map[string]error{"wrong owner": store.ErrConflict, "wrong status": store.ErrConflict, "unknown run": store.ErrNotFound}[name]
			if want == nil {
				want = store.ErrInvalid
			}
			wantErr(t, name, err, want)
		}
		wantView(t, "no step written by failed appends", list(t, st, &store.StepListParams{SessionID: "s1"}), "s1/1/x1")
		if r2 := getRun(t, st, "r1"); r2.Cursor != "tools" || r2.StepCount != 1 {
			t.Errorf("run changed by failed appends: %+v", r2)
		}
		if s := getSession(t, st, "s1"); s.LastSequence != 1 {
			t.Errorf("LastSequence %d after failed appends", s.LastSequence)
		}
	})
}
