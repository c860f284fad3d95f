package stepwise_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

func doneAgent() *stepwise.Agent {
	return &stepwise.Agent{Name: "reply", Model: &ctxModel{fn: func(context.Context) (*llm.Response, error) {
		return &llm.Response{Content: "done"}, nil
	}}}
}

// A run leased by a process that was killed (SIGKILL of serve on SQLite)
// is taken over as soon as the next process opens the file and starts,
// not when the lease expires: the opener owns the file, so the lease of
// an owner that is not alive in it is a dead process's.
func TestExclusiveStoreTakesDeadLeaseOnStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "killed.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "reply", Input: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.RunClaim(ctx, &store.RunClaimParams{Owner: "host-4242-dead", Lease: time.Hour}); err != nil || len(got) != 1 {
		t.Fatalf("claim as the killed process: %v %v", got, err)
	}
	if err := st.Close(); err != nil { // the process died holding the lease
		t.Fatal(err)
	}
	st, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	startEngine(t, st, stepwise.Config{Agents: []*stepwise.Agent{doneAgent()}, Lease: time.Minute})
	waitStatus(t, st, "r", steptype.RunCompleted)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the dead process's run finished %v after the start; its lease had an hour left", took)
	}
}

// A run leased to this engine's own owner that none of its executions
// holds (its execution stopped on a store error) is handed back within two
// polls, not after its lease.
func TestOwnStaleLeaseTakenOver(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "reply", Input: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.RunClaim(ctx, &store.RunClaimParams{Owner: "me", Lease: time.Hour}); err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	start := time.Now()
	startEngine(t, st, stepwise.Config{Agents: []*stepwise.Agent{doneAgent()}, Owner: "me", Lease: time.Minute})
	waitStatus(t, st, "r", steptype.RunCompleted)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the stale run finished %v after the start; its lease had an hour left", took)
	}
}
