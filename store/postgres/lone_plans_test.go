package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// A lone append (a group of one) reads its session, its step ids, its run
// and the run's waiting steps on the group's generic plans, made once per
// connection: planned for its parameters instead, as it was, each of those
// = ANY($1) reads cost the server 100–200 µs of planning per append.
func TestLoneAppendReadsOnGenericPlans(t *testing.T) {
	t.Parallel()
	st := open(t, postgres.Config{Schema: freshSchema(t), MaxConns: 1})
	ctx := t.Context()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	run := &steptype.Run{ID: "r", SessionID: "s", Agent: "a", Status: steptype.RunRunning,
		LeaseOwner: "me", LeaseExpires: time.Now().Add(time.Hour)}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: run}); err != nil {
		t.Fatal(err)
	}
	running := []steptype.RunStatus{steptype.RunRunning}
	const appends = 8
	for i := range appends {
		step := &steptype.Step{ID: fmt.Sprintf("step-%d", i), SessionID: "s", RunID: "r", Kind: steptype.KindTool,
			Status: steptype.StepCompleted, Content: "result"}
		p := &store.StepAppendParams{Steps: []*steptype.Step{step},
			Runs: []*store.RunUpdateParams{{ID: "r", Owner: "me", ExpectStatus: running, StepDelta: 1}}}
		if _, err := st.StepAppend(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	plans, err := st.PlanCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for q, n := range plans {
		if !strings.Contains(q, "= ANY($1)") || (!strings.Contains(q, "FROM sessions") && !strings.Contains(q, "FROM steps") &&
			!strings.Contains(q, "FROM runs")) {
			continue
		}
		reads++
		if n[1] != 0 || n[0] < appends {
			t.Errorf("%d lone appends: %d generic and %d custom plans of\n%s\nwant %d generic, no custom", appends, n[0], n[1], q, appends)
		}
	}
	if reads != 4 {
		t.Errorf("found %d reads by = ANY($1) among the prepared statements, want 4 (sessions, step ids, runs, waiting steps): %v", reads, plans)
	}
}
