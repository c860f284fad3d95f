package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/retention"
)

var day = 24 * time.Hour

// sessionIDs lists every session id, sorted.
func sessionIDs(t *testing.T, st store.Store) []string {
	t.Helper()
	var ids []string
	q := &store.SessionListParams{Limit: 1000}
	for {
		page, err := st.SessionList(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Sessions {
			ids = append(ids, s.ID)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	slices.Sort(ids)
	return ids
}

func wantSessions(t *testing.T, what string, st store.Store, want ...string) {
	t.Helper()
	if got := sessionIDs(t, st); !slices.Equal(got, want) {
		t.Errorf("%s: sessions %v, want %v", what, got, want)
	}
}

func prune(t *testing.T, st store.Store, p retention.Params) *retention.Result {
	t.Helper()
	res, err := retention.Prune(t.Context(), st, p)
	if err != nil {
		t.Fatalf("Prune(%+v): %v", p, err)
	}
	return res
}

func ids(ss []*retention.Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

func testRetention(t *testing.T, h *harness) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	h.sub(t, "AgeAndCount", func(t *testing.T, st store.Store) {
		seedSession(t, st, "a-old", "", 0, 3, "a", now.Add(-30*day))
		seedSession(t, st, "a-mid", "", 0, 3, "a", now.Add(-10*day))
		seedSession(t, st, "a-new", "", 0, 3, "a", now.Add(-time.Hour))
		seedSession(t, st, "b-old", "", 0, 3, "b", now.Add(-40*day))
		dry := prune(t, st, retention.Params{OlderThan: 7 * day, Now: now, DryRun: true})
		if got := ids(dry.Deleted); !slices.Equal(got, []string{"a-mid", "a-old", "b-old"}) || dry.Steps != 9 {
			t.Errorf("dry run would delete %v (%d steps)", got, dry.Steps)
		}
		wantSessions(t, "after a dry run", st, "a-mid", "a-new", "a-old", "b-old")
		res := prune(t, st, retention.Params{OlderThan: 7 * day, KeepPerAgent: 2, Agent: "a", Now: now})
		if got := ids(res.Deleted); !slices.Equal(got, []string{"a-old"}) || res.Steps != 3 {
			t.Errorf("deleted %v (%d steps), want [a-old] (3)", got, res.Steps)
		}
		wantSessions(t, "older than 7 days, keeping 2 of agent a", st, "a-mid", "a-new", "b-old")
		_, err := st.StepGet(t.Context(), &store.StepGetParams{ID: "a-old-1"})
		wantErr(t, "step of a pruned session", err, store.ErrNotFound)
		prune(t, st, retention.Params{KeepPerAgent: 1})
		wantSessions(t, "keeping 1 per agent", st, "a-new", "b-old")
	})
	h.sub(t, "BadInput", func(t *testing.T, st store.Store) {
		seedSession(t, st, "s", "", 0, 1, "a", now.Add(-30*day))
		for _, p := range []retention.Params{
			{OlderThan: -time.Hour},
			{KeepPerAgent: -1},
			{},
			{OlderThan: time.Hour, Statuses: []steptype.RunStatus{steptype.RunWaiting}},
		} {
			_, err := retention.Prune(t.Context(), st, p)
			wantErr(t, "prune with bad params", err, store.ErrInvalid)
		}
		_, err := retention.Prune(t.Context(), st, retention.Params{OlderThan: time.Hour, Agent: "nobody"})
		wantErr(t, "prune an unknown agent", err, store.ErrNotFound)
		wantSessions(t, "after refused prunes", st, "s")
	})
	h.sub(t, "UnfinishedAndStatus", func(t *testing.T, st store.Store) {
		for _, id := range []string{"done", "failed", "waiting", "none"} {
			seedSession(t, st, id, "", 0, 1, "a", now.Add(-30*day))
		}
		at := now.Add(-30 * day)
		err := st.RunImport(t.Context(), &store.RunImportParams{Runs: []*steptype.Run{
			{ID: "r1", SessionID: "done", Agent: "a", Status: steptype.RunCompleted, CreatedAt: at, UpdatedAt: at},
			{ID: "r2", SessionID: "failed", Agent: "a", Status: steptype.RunFailed, CreatedAt: at, UpdatedAt: at},
			{ID: "r3", SessionID: "waiting", Agent: "a", Status: steptype.RunWaiting, CreatedAt: at, UpdatedAt: at},
		}})
		if err != nil {
			t.Fatal(err)
		}
		res := prune(t, st, retention.Params{OlderThan: day, Now: now, Statuses: []steptype.RunStatus{steptype.RunCompleted}})
		if got := ids(res.Deleted); !slices.Equal(got, []string{"done"}) {
			t.Errorf("status completed deleted %v", got)
		}
		res = prune(t, st, retention.Params{OlderThan: day, Now: now})
		if got := ids(res.Deleted); !slices.Equal(got, []string{"failed", "none"}) || !slices.Equal(ids(res.Kept), []string{"waiting"}) {
			t.Errorf("deleted %v kept %v, want [failed none] and the waiting session kept", got, ids(res.Kept))
		}
		if _, err := st.RunGet(t.Context(), &store.RunGetParams{ID: "r2"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("run of a pruned session: %v", err)
		}
		wantSessions(t, "after pruning", st, "waiting")
	})
	h.sub(t, "ForkSafe", func(t *testing.T, st store.Store) {
		seedSession(t, st, "p", "", 0, 5, "a", now.Add(-30*day))
		seedSession(t, st, "old-fork", "p", 2, 1, "a", now.Add(-20*day))
		seedSession(t, st, "kept-fork", "p", 4, 2, "a", now.Add(-time.Hour))
		before := list(t, st, &store.StepListParams{SessionID: "kept-fork"})
		res := prune(t, st, retention.Params{OlderThan: 7 * day, Now: now})
		if !slices.Equal(ids(res.Deleted), []string{"old-fork"}) || !slices.Equal(ids(res.Kept), []string{"p"}) {
			t.Errorf("deleted %v kept %v: want the old fork gone and its parent kept for kept-fork", ids(res.Deleted), ids(res.Kept))
		}
		wantSessions(t, "fork-safe prune", st, "kept-fork", "p")
		res = prune(t, st, retention.Params{OlderThan: 7 * day, Now: now, MaterializeForks: true, BatchSize: 2})
		if !slices.Equal(ids(res.Deleted), []string{"p"}) || !slices.Equal(ids(res.Materialized), []string{"kept-fork"}) || res.Copied != 4 {
			t.Errorf("deleted %v materialised %v copied %d", ids(res.Deleted), ids(res.Materialized), res.Copied)
		}
		wantSessions(t, "after materialising", st, "kept-fork")
		after := list(t, st, &store.StepListParams{SessionID: "kept-fork"})
		if len(after) != len(before) {
			t.Fatalf("materialised fork has %d steps, had %d", len(after), len(before))
		}
		for i := range after {
			if after[i].Content != before[i].Content || after[i].Sequence != before[i].Sequence || after[i].SessionID != "kept-fork" {
				t.Errorf("step %d after materialising = %s/%d %q, before %s/%d %q", i, after[i].SessionID, after[i].Sequence,
					after[i].Content, before[i].SessionID, before[i].Sequence, before[i].Content)
			}
		}
		f := getSession(t, st, "kept-fork")
		if f.ParentSessionID != "" || f.LastSequence != 6 || f.InputTokens != 60 {
			t.Errorf("materialised fork = %+v", f)
		}
	})
	h.sub(t, "ForkWithUnfinishedRun", func(t *testing.T, st store.Store) {
		seedSession(t, st, "p", "", 0, 2, "a", now.Add(-30*day))
		seedSession(t, st, "f", "p", 1, 1, "a", now.Add(-time.Hour))
		at := now.Add(-time.Hour)
		err := st.RunImport(t.Context(), &store.RunImportParams{Runs: []*steptype.Run{
			{ID: "r", SessionID: "f", Agent: "a", Status: steptype.RunWaiting, CreatedAt: at, UpdatedAt: at}}})
		if err != nil {
			t.Fatal(err)
		}
		res := prune(t, st, retention.Params{OlderThan: day, Now: now, MaterializeForks: true})
		if len(res.Deleted) != 0 || len(res.Materialized) != 0 {
			t.Errorf("deleted %v materialised %v: a fork with an unfinished run is never touched", ids(res.Deleted), ids(res.Materialized))
		}
		wantLineage(t, st, "f", "p/1/p-1 f/2/f-2")
	})
	h.sub(t, "TruncateKeepsActivity", func(t *testing.T, st store.Store) {
		old := now.Add(-30 * day)
		seedSession(t, st, "s", "", 0, 10, "a", old)
		// A prune interrupted after one batch: the session keeps its age.
		n, err := st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: "s", StartSeq: 6, KeepActivity: true})
		if err != nil || n != 5 {
			t.Fatalf("StepTruncate(KeepActivity) = %d, %v", n, err)
		}
		if s := getSession(t, st, "s"); !s.UpdatedAt.Equal(old) || s.LastSequence != 5 {
			t.Errorf("after a batch: updated %v last %d, want %v and 5", s.UpdatedAt, s.LastSequence, old)
		}
		res := prune(t, st, retention.Params{OlderThan: 7 * day, Now: now})
		if !slices.Equal(ids(res.Deleted), []string{"s"}) || res.Steps != 5 {
			t.Errorf("the next prune deleted %v (%d steps)", ids(res.Deleted), res.Steps)
		}
	})
	h.sub(t, "Batched", func(t *testing.T, st store.Store) {
		seedSession(t, st, "big", "", 0, 1200, "a", now.Add(-30*day))
		seedSession(t, st, "keep", "", 0, 1, "a", now)
		for _, sid := range []string{"big-7", "keep-1"} {
			b, err := st.BlobPut(t.Context(), &store.BlobPutParams{Data: []byte("shot of " + sid), ContentType: "image/png"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.AttachmentAdd(t.Context(), &store.AttachmentAddParams{Attachment: &store.Attachment{
				ID: "att-" + sid, StepID: sid, Name: "s", Kind: "screenshot", BlobHash: b.Hash}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.EvalPut(t.Context(), &store.EvalPutParams{Eval: &store.Eval{ID: "ev", TargetKind: store.TargetSession,
			TargetID: "big", Name: "q", Source: store.SourceUser, Score: 1}}); err != nil {
			t.Fatal(err)
		}
		res := prune(t, st, retention.Params{OlderThan: day, Now: now, BatchSize: 100})
		if res.Steps != 1200 || !slices.Equal(ids(res.Deleted), []string{"big"}) {
			t.Errorf("deleted %v, %d steps", ids(res.Deleted), res.Steps)
		}
		wantSessions(t, "after a batched prune", st, "keep")
		if res.Blobs != 1 {
			t.Errorf("blobs pruned = %d, want 1 (the kept session's blob stays)", res.Blobs)
		}
		_, err := st.EvalGet(t.Context(), &store.EvalGetParams{ID: "ev"})
		wantErr(t, "eval of a pruned session", err, store.ErrNotFound)
		if _, err := st.AttachmentGet(t.Context(), &store.AttachmentGetParams{ID: "att-keep-1"}); err != nil {
			t.Errorf("attachment of the kept session: %v", err)
		}
	})
}
