package postgres_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/pgtest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// A lone append (a group of one) reads its session, its run, and its step
// ids with the run's waiting steps on the group's generic plans, made once per
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
	if reads != 3 {
		t.Errorf("found %d reads by = ANY($1) among the prepared statements, want 3 (sessions, runs, step ids with waiting steps): %v", reads, plans)
	}
}

// A group's reads run on generic plans, and its writes then plan as the
// connection's plan_cache_mode says (the group puts it back after its
// reads): with force_custom_plan on the connection, the reads have generic
// plans only and the writes custom plans only, a group of one's and a
// group of many's.
func TestGroupWritesPlanAsConfigured(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	st := open(t, postgres.Config{DSN: dsn + sep + "plan_cache_mode=force_custom_plan", Schema: freshSchema(t), MaxConns: 1})
	ctx := t.Context()
	const runs, appends = 8, 6
	running := []steptype.RunStatus{steptype.RunRunning}
	for i := range runs {
		sid, rid := fmt.Sprintf("s%d", i), fmt.Sprintf("r%d", i)
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: sid}); err != nil {
			t.Fatal(err)
		}
		run := &steptype.Run{ID: rid, SessionID: sid, Agent: "a", Status: steptype.RunRunning,
			LeaseOwner: "me", LeaseExpires: time.Now().Add(time.Hour)}
		if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	appendTo := func(i, j int) error {
		step := &steptype.Step{ID: fmt.Sprintf("step-%d-%d", i, j), SessionID: fmt.Sprintf("s%d", i), RunID: fmt.Sprintf("r%d", i),
			Kind: steptype.KindTool, Status: steptype.StepCompleted, Content: "result"}
		_, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step},
			Runs: []*store.RunUpdateParams{{ID: fmt.Sprintf("r%d", i), Owner: "me", ExpectStatus: running, StepDelta: 1}}})
		return err
	}
	for j := range appends { // lone appends
		if err := appendTo(0, j); err != nil {
			t.Fatal(err)
		}
	}
	// Groups of many: the runs append at once, on one connection.
	var wg sync.WaitGroup
	errs := make(chan error, runs*appends)
	for i := range runs {
		wg.Go(func() {
			for j := range appends {
				errs <- appendTo(i, appends+j)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	commits, grouped := st.GroupCommitStats()
	if grouped <= commits {
		t.Fatalf("%d appends in %d commits: no group of many", grouped, commits)
	}
	plans, err := st.PlanCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reads, writes int
	for q, n := range plans {
		switch {
		case strings.HasPrefix(q, "/* group */"):
			reads++
			if n[1] != 0 {
				t.Errorf("a group's read planned for its parameters (%d generic, %d custom plans):\n%s", n[0], n[1], q)
			}
		case strings.HasPrefix(q, "WITH i AS"), strings.HasPrefix(q, "SELECT steps_stats_fold"), strings.HasPrefix(q, "UPDATE runs"),
			strings.HasPrefix(q, "UPDATE sessions"), strings.HasPrefix(q, "WITH ss AS"):
			writes++
			if n[0] != 0 || n[1] == 0 {
				t.Errorf("a group's write: %d generic and %d custom plans, want custom ones only (force_custom_plan):\n%s", n[0], n[1], q)
			}
		}
	}
	if reads < 3 || writes < 3 {
		t.Errorf("%d reads and %d writes of groups among the prepared statements, want at least 3 each: %v", reads, writes, plans)
	}
}
