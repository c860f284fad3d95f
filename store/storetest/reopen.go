package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// snapshot reads everything the reopen test compares.
func snapshot(t *testing.T, st store.Store) map[string]any {
	t.Helper()
	ctx := t.Context()
	page, err := st.SessionList(ctx, &store.SessionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.RunList(ctx, &store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"sessions": page.Sessions,
		"runs":     runs,
		"p":        list(t, st, &store.StepListParams{SessionID: "p"}),
		"f":        list(t, st, &store.StepListParams{SessionID: "f"}),
	}
}

func testReopen(t *testing.T, h *harness) {
	if h.opts.Reopen == nil {
		t.Skip("Options.Reopen is nil: the driver keeps nothing across Close")
	}
	h.sub(t, "KeepsEverything", func(t *testing.T, st store.Store) {
		mustSession(t, st, "p")
		mustAppend(t, st, fullStep("p", "full"))
		fill(t, st, "p", "p", 3)
		mustFork(t, st, "f", "p", 2)
		fill(t, st, "f", "f", 1)
		mustRun(t, st, &steptype.Run{ID: "r1", SessionID: "f", Agent: "a", State: json.RawMessage(`{"k":"v"}`)})
		claim(t, st, store.RunClaimParams{Owner: "A", Lease: time.Minute, Now: t0})
		before := snapshot(t, st)
		st = h.opts.Reopen(t, st)
		sameJSON(t, "after reopen", snapshot(t, st), before)
		wantView(t, "append after reopen", mustAppend(t, st, newStep("f", "f-2")), "f/4/f-2")
		if _, err := st.SessionFork(t.Context(), &store.SessionForkParams{ID: "f", ParentID: "p", Sequence: 1}); err == nil {
			t.Error("fork id reused after reopen")
		}
	})
}
