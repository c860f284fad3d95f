package stepwise_test

import (
	"context"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// A parent left waiting on a child that ended (its wake-up lost with a
// killed process) is queued again by the next engine's start.
func TestParentOfEndedChildrenIsWoken(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	ctx := context.Background()
	child := &stepwise.Agent{Name: "child", Model: &fakeModel{}}
	root := &stepwise.Agent{Name: "root", Model: delegator("child"), SubAgents: []*stepwise.Agent{child}}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1", Agent: "root"}); err != nil {
		t.Fatal(err)
	}
	parent := &steptype.Run{ID: "p1", SessionID: "s1", Agent: "root", Input: "go", Status: steptype.RunWaiting}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: parent}); err != nil {
		t.Fatal(err)
	}
	kid := &steptype.Run{ID: "c1", SessionID: "s1", Agent: "child", ParentRunID: "p1", Hop: 1, Input: "x", Status: steptype.RunCompleted}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: kid}); err != nil {
		t.Fatal(err)
	}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r, err := st.RunGet(ctx, &store.RunGetParams{ID: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != steptype.RunWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the parent of an ended child is still waiting")
		}
	}
}
