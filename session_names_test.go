package stepwise_test

import (
	"context"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// TestDerivedSessionNames: an untitled session is named after its first
// message; forks, edits, retries and replays are named by what they are
// and where they came from, never by a raw id; a chosen title wins.
func TestDerivedSessionNames(t *testing.T) {
	t.Parallel()
	e, st := newEngine(t, &stepwise.Agent{Name: "n", Model: echoModel(), Tools: []tool.Tool{constTool("a", "A"), constTool("b", "B")}})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "n", Input: "Plan a trip to Lisbon in May"}))
	if err != nil {
		t.Fatal(err)
	}
	sid := run.SessionID
	title := func(id string) string {
		s, err := st.SessionGet(ctx, &store.SessionGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return s.Title
	}
	if got := title(sid); got != "Plan a trip to Lisbon in May" {
		t.Fatalf("untitled session: title %q, want its first message", got)
	}
	long, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "n", Input: "Plan a trip\nto Lisbon in May, with a day in Sintra, two in Porto and a night train back"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := title(long.SessionID); got != "Plan a trip to Lisbon in May, with a day in Sintra, two in…" {
		t.Fatalf("long first message: title %q", got)
	}
	chosen, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "n", Input: "hi", Title: "chosen"}))
	if err != nil || title(chosen.SessionID) != "chosen" {
		t.Fatalf("chosen title: %v", err)
	}
	if f, err := e.Fork(ctx, stepwise.ForkParams{SessionID: chosen.SessionID, At: 1}); err != nil || title(f.ID) != "fork of chosen at #1" {
		t.Fatalf("fork of a titled session: %v", err)
	}
	f, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: 2})
	if err != nil || title(f.ID) != `fork of "Plan a trip to Lisbon in May" at #2` {
		t.Fatalf("fork: %q %v", title(f.ID), err)
	}
	edit := "Plan a trip to Porto"
	ed, err := e.Fork(ctx, stepwise.ForkParams{SessionID: f.ID, At: 1, Edit: &edit})
	if err != nil || title(ed.ID) != `edit of fork of "Plan a trip to Lisbon in May" at #2 at #1` {
		t.Fatalf("edit: %q %v", title(ed.ID), err)
	}
	named, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: 1, Title: "mine"})
	if err != nil || title(named.ID) != "mine" {
		t.Fatalf("named fork: %q %v", title(named.ID), err)
	}
	r, err := e.Retry(ctx, stepwise.RetryParams{SessionID: sid, From: 2})
	if err != nil || title(r.SessionID) != `retry of "Plan a trip to Lisbon in May" from #2` {
		t.Fatalf("retry: %q %v", title(r.SessionID), err)
	}
	rp, err := e.Replay(ctx, stepwise.ReplayParams{SessionID: sid})
	if err != nil || title(rp.SessionID) != `replay of "Plan a trip to Lisbon in May"` {
		t.Fatalf("replay: %q %v", title(rp.SessionID), err)
	}
}
