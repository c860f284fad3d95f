package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/retention"
)

// cp is a checkpoint at step "<session>-<seq>" (as fill names them) whose
// state records v.
func cp(session string, seq int64, v string) *store.ContextCheckpoint {
	return &store.ContextCheckpoint{SessionID: session, Sequence: seq, StepID: fmt.Sprintf("%s-%d", session, seq),
		Messages: seq * 2, Tokens: seq * 10, State: json.RawMessage(`{"v":"` + v + `"}`)}
}

func putCheckpoints(t *testing.T, st store.Store, cps ...*store.ContextCheckpoint) {
	t.Helper()
	if err := st.ContextCheckpointPut(t.Context(), &store.ContextCheckpointPutParams{Checkpoints: cps}); err != nil {
		t.Fatalf("ContextCheckpointPut: %v", err)
	}
}

// wantCheckpoints lists a session's checkpoints and compares them, as
// "seq:v" items newest first, with want.
func wantCheckpoints(t *testing.T, st store.Store, p *store.ContextCheckpointListParams, want string) {
	t.Helper()
	got, err := st.ContextCheckpointList(t.Context(), p)
	if err != nil {
		t.Fatalf("ContextCheckpointList(%+v): %v", p, err)
	}
	view := ""
	for i, c := range got {
		var s struct{ V string }
		if err := json.Unmarshal(c.State, &s); err != nil {
			t.Fatalf("checkpoint %d state %q: %v", c.Sequence, c.State, err)
		}
		if c.SessionID != p.SessionID || c.StepID != fmt.Sprintf("%s-%d", p.SessionID, c.Sequence) ||
			c.Messages != c.Sequence*2 || c.Tokens != c.Sequence*10 {
			t.Errorf("checkpoint %d = %+v", c.Sequence, c)
		}
		if i > 0 {
			view += " "
		}
		view += fmt.Sprintf("%d:%s", c.Sequence, s.V)
	}
	if view != want {
		t.Errorf("checkpoints of %s (%+v) = %q, want %q", p.SessionID, p, view, want)
	}
}

// testCheckpoints runs the store.ContextCheckpointStore contract.
func testCheckpoints(t *testing.T, h *harness) {
	h.sub(t, "PutList", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s")
		fill(t, st, "s", "s", 6)
		putCheckpoints(t, st, cp("s", 2, "a"), cp("s", 4, "b"))
		putCheckpoints(t, st, cp("s", 5, "c"), cp("s", 4, "b2")) // replaces 4
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s"}, "5:c 4:b2 2:a")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s", MaxSeq: 4}, "4:b2 2:a")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s", MaxSeq: 3, Limit: 1}, "2:a")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s", Limit: 2}, "5:c 4:b2")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s", MaxSeq: 1}, "")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "other"}, "")
	})
	h.sub(t, "SkipsUnknownStep", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s")
		fill(t, st, "s", "s", 3)
		wrongSeq := cp("s", 2, "wrong-seq")
		wrongSeq.StepID = "s-3"
		wrongSession := cp("s", 3, "wrong-session")
		wrongSession.SessionID = "t"
		putCheckpoints(t, st, cp("s", 1, "ok"), cp("s", 9, "no-step"), wrongSeq, wrongSession)
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s"}, "1:ok")
	})
	h.sub(t, "NoLineage", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		fill(t, st, "p", "p", 3)
		if _, err := st.SessionFork(t.Context(), &store.SessionForkParams{ID: "f", ParentID: "p", Sequence: 2}); err != nil {
			t.Fatal(err)
		}
		fill(t, st, "f", "f", 1) // f-1 at sequence 3
		own := cp("f", 3, "own")
		own.StepID = "f-1"
		putCheckpoints(t, st, cp("p", 2, "parent"), own)
		got, err := st.ContextCheckpointList(t.Context(), &store.ContextCheckpointListParams{SessionID: "f"})
		if err != nil || len(got) != 1 || got[0].Sequence != 3 || got[0].StepID != "f-1" {
			t.Errorf("fork's checkpoints = %v, %v: want only its own at 3", got, err)
		}
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "p"}, "2:parent")
	})
	h.sub(t, "TruncateRemoves", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s")
		fill(t, st, "s", "s", 5)
		putCheckpoints(t, st, cp("s", 2, "a"), cp("s", 3, "b"), cp("s", 5, "c"))
		if _, err := truncate(st, t, "s", 3); err != nil {
			t.Fatal(err)
		}
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s"}, "2:a")
		// New steps at the truncated sequences do not revive them.
		mustAppend(t, st, newStep("s", "n3"), newStep("s", "n4"), newStep("s", "n5"))
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s"}, "2:a")
	})
	h.sub(t, "DeleteRemoves", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s")
		fill(t, st, "s", "s", 2)
		putCheckpoints(t, st, cp("s", 2, "a"))
		if err := st.SessionDelete(t.Context(), &store.SessionDeleteParams{ID: "s"}); err != nil {
			t.Fatal(err)
		}
		mustSession(t, st, "s")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s"}, "")
	})
	h.sub(t, "PruneRemoves", func(t *testing.T, st store.Store) {
		now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
		seedSession(t, st, "old", "", 0, 3, "a", now.Add(-30*day))
		seedSession(t, st, "new", "", 0, 3, "a", now)
		putCheckpoints(t, st, cp("old", 2, "a"), cp("new", 2, "b"))
		prune(t, st, retention.Params{OlderThan: 7 * day, Now: now})
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "old"}, "")
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "new"}, "2:b")
	})
	h.sub(t, "BadInput", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s")
		fill(t, st, "s", "s", 2)
		for i, p := range []*store.ContextCheckpointPutParams{
			nil,
			{Checkpoints: []*store.ContextCheckpoint{cp("s", 1, "ok"), {SessionID: "s", Sequence: 2}}},
			{Checkpoints: []*store.ContextCheckpoint{cp("s", 1, "ok"), {SessionID: "s", Sequence: 2, StepID: "s-2", State: json.RawMessage(`{`)}}},
			{Checkpoints: []*store.ContextCheckpoint{{SessionID: "s", Sequence: 0, StepID: "s-1", State: json.RawMessage(`{}`)}}},
		} {
			wantErr(t, fmt.Sprintf("bad put %d", i), st.ContextCheckpointPut(t.Context(), p), store.ErrInvalid)
		}
		wantCheckpoints(t, st, &store.ContextCheckpointListParams{SessionID: "s"}, "") // nothing changed
		_, err := st.ContextCheckpointList(t.Context(), &store.ContextCheckpointListParams{})
		wantErr(t, "list without a session", err, store.ErrInvalid)
	})
}
