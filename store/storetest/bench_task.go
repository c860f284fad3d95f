package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// BenchTaskCycle measures what a worker step costs the store
// (docs/workers.md): a task created, claimed and finished, one after
// another on one goroutine, with the time of each reported as create-ns,
// claim-ns and finish-ns (means, per op).
func BenchTaskCycle(b *testing.B, st store.Store) {
	ctx := b.Context()
	benchTaskRun(b, st, "bench-tasks")
	var create, claim, finish time.Duration
	result := []byte(`{"worker":"w","complete":{"next":"g"}}`)
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		t, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: &store.Task{ID: fmt.Sprintf("t%d", i), Key: fmt.Sprintf("k%d", i),
			Kind: "step", Name: "w", Agent: "a", SessionID: "bench-tasks", RunID: "bench-tasks", Input: []byte(`{"state":{}}`)}})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ts, err := st.TaskClaim(ctx, &store.TaskClaimParams{Owner: "w", Agents: []string{"a"}, Lease: time.Minute})
		if err != nil || len(ts) != 1 || ts[0].ID != t.ID {
			b.Fatalf("claim: %v, %v", ts, err)
		}
		t2 := time.Now()
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: t.ID, Token: ts[0].Token, State: store.TaskCompleted, Result: result}); err != nil {
			b.Fatal(err)
		}
		create, claim, finish = create+t1.Sub(t0), claim+t2.Sub(t1), finish+time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(create.Nanoseconds())/n, "create-ns")
	b.ReportMetric(float64(claim.Nanoseconds())/n, "claim-ns")
	b.ReportMetric(float64(finish.Nanoseconds())/n, "finish-ns")
}

// BenchTaskHandover measures a worker step's task writes as the worker
// service makes them (docs/workers.md): created lazily, already claimed
// by a waiting worker, and finished with Visible, reported as create-ns
// and visible-ns (until the finish is visible) besides the op's time
// (until the finish is durable).
func BenchTaskHandover(b *testing.B, st store.Store) {
	ctx := b.Context()
	benchTaskRun(b, st, "bench-handover")
	var create, visible time.Duration
	result := []byte(`{"worker":"w","complete":{"next":"g"}}`)
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		t, err := st.TaskCreate(ctx, &store.TaskCreateParams{Task: &store.Task{ID: fmt.Sprintf("t%d", i), Key: fmt.Sprintf("k%d", i),
			Kind: "step", Name: "w", Agent: "a", SessionID: "bench-handover", RunID: "bench-handover", Input: []byte(`{"state":{}}`)},
			Owner: "w", Lease: time.Minute, Lazy: true})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var t2 time.Time
		if _, err := st.TaskFinish(ctx, &store.TaskFinishParams{ID: t.ID, Token: t.Token, State: store.TaskCompleted, Result: result,
			Visible: func(*store.Task) { t2 = time.Now() }}); err != nil {
			b.Fatal(err)
		}
		create, visible = create+t1.Sub(t0), visible+t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(create.Nanoseconds())/n, "create-ns")
	b.ReportMetric(float64(visible.Nanoseconds())/n, "visible-ns")
}

// benchTaskRun creates session id with a running run id of agent "a", for
// the tasks of a benchmark.
func benchTaskRun(b *testing.B, st store.Store, id string) {
	b.Helper()
	if _, err := st.SessionCreate(b.Context(), &store.SessionCreateParams{ID: id}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.RunCreate(b.Context(), &store.RunCreateParams{Run: &steptype.Run{ID: id, SessionID: id, Agent: "a", Status: steptype.RunRunning}}); err != nil {
		b.Fatal(err)
	}
}
