package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/retention"
)

// mh0 is the start of the hour-table fixture: an hour boundary well in the
// past, so its hours are complete and drivers with an hour table (SQLite
// and PostgreSQL, metric_hours) fold them.
var mh0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// testMetricsHours checks the answers of many queries (ranges on and off
// hour boundaries, hourly and daily buckets, every agent) against the same
// queries recomputed without any hour table (a split by a key no session
// has: one series, read from the rollups and runs), cold, warm, and after
// every write that changes a past hour: steps appended and imported into
// it, the run of an imported step imported after it with another agent, a run finished in it, a truncate, the failure of a waiting step (and of its run), an
// eval, a session delete and a prune. Costs are binary fractions, so every
// grouping of the sums is exact.
func testMetricsHours(t *testing.T, st store.Store) {
	ctx := t.Context()
	for _, s := range []struct{ id, agent string }{{"ha", "a"}, {"hb", "b"}, {"hc", "c"}, {"hd", "a"}} {
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: s.id, Agent: s.agent, Now: mh0}); err != nil {
			t.Fatal(err)
		}
	}
	ms1 := time.Millisecond
	type run struct {
		id, sess, agent string
		at, dur         time.Duration
		status          steptype.RunStatus
	}
	for i, r := range []run{
		{"ra1", "ha", "a", 10 * time.Minute, 1500 * ms1, steptype.RunCompleted},
		{"ra2", "ha", "a", 59*time.Minute + 59*time.Second, 3 * time.Second, steptype.RunFailed},
		{"rb1", "hb", "b", 70 * time.Minute, 250 * ms1, steptype.RunCompleted},
		{"rd1", "hd", "b", 2 * time.Hour, 4 * time.Second, steptype.RunCompleted}, // a hand-off: agent b in a session of a
		{"rc1", "hc", "c", 3*time.Hour + 30*time.Minute, 700 * ms1, steptype.RunCompleted},
		{"rw", "hd", "a", 4 * time.Hour, 0, steptype.RunWaiting},
	} {
		x := &steptype.Run{ID: r.id, SessionID: r.sess, Agent: r.agent, Status: r.status, CreatedAt: mh0.Add(r.at)}
		if r.dur > 0 {
			x.FinishedAt = x.CreatedAt.Add(r.dur + time.Duration(i)*time.Microsecond)
		}
		mustRun(t, st, x)
	}
	seq := 0
	step := func(sess, runID string, at time.Duration, kind steptype.Kind, status steptype.StepStatus) *steptype.Step {
		seq++
		s := &steptype.Step{ID: fmt.Sprintf("st%d", seq), SessionID: sess, RunID: runID, Kind: kind, Status: status,
			CreatedAt: mh0.Add(at), Metrics: steptype.Metrics{InputTokens: int64(seq), OutputTokens: int64(2 * seq), Cost: float64(seq) / 8}}
		if kind == steptype.KindError {
			s.Error = &steptype.StepError{Message: "boom"}
		}
		if status == steptype.StepWaiting {
			s.Metrics = steptype.Metrics{}
			s.Role, s.Inputs = steptype.RoleTool, json.RawMessage(`{"prompt":"ok?"}`)
		}
		return s
	}
	llm, done := steptype.KindLLM, steptype.StepCompleted
	mustAppend(t, st, step("ha", "ra1", 10*time.Minute, llm, done), step("ha", "ra1", 11*time.Minute+30*time.Second, llm, done))
	mustAppend(t, st, step("ha", "ra2", 59*time.Minute+59*time.Second+500*ms1, steptype.KindError, steptype.StepFailed),
		step("ha", "", 60*time.Minute+10*ms1, llm, done))
	mustAppend(t, st, step("hb", "rb1", 70*time.Minute, llm, done), step("hb", "rb1", 75*time.Minute, steptype.KindTool, done))
	mustAppend(t, st, step("hd", "rd1", 2*time.Hour+time.Second, llm, done), step("hd", "", 2*time.Hour+45*time.Minute, llm, done))
	mustAppend(t, st, step("hc", "rc1", 3*time.Hour+30*time.Minute, llm, done), step("hc", "rc1", 3*time.Hour+31*time.Minute, llm, done))
	mustAppend(t, st, step("hd", "rw", 4*time.Hour+time.Minute, llm, done))
	waiting := step("hd", "rw", 4*time.Hour+2*time.Minute, steptype.KindInput, steptype.StepWaiting)
	mustAppend(t, st, waiting)
	mustAppend(t, st, step("hc", "", 5*time.Hour+20*time.Minute, llm, done))
	evals := 0
	eval := func(target string, at time.Duration, score float64) {
		evals++
		_, err := st.EvalPut(ctx, &store.EvalPutParams{Now: mh0.Add(at), Eval: &store.Eval{ID: fmt.Sprintf("he%d", evals),
			TargetKind: store.TargetRun, TargetID: target, Name: "q", Source: store.SourceUser, Score: score}})
		if err != nil {
			t.Fatal(err)
		}
	}
	eval("ra1", 20*time.Minute, 0.5)
	eval("rd1", 2*time.Hour+10*time.Minute, 0.25)

	check := func(when string) {
		t.Helper()
		for _, from := range []time.Duration{0, 17 * time.Minute, -2 * time.Hour, 59*time.Minute + 59*time.Second + 600*ms1} {
			for _, to := range []time.Duration{6 * time.Hour, 5*time.Hour + 31*time.Minute, 30 * time.Hour, 2 * time.Hour} {
				for _, bucket := range []store.MetricsBucket{store.BucketHour, store.BucketDay} {
					for _, agent := range []string{"", "a", "b", "c", "zz"} {
						p := store.MetricsParams{From: mh0.Add(from), To: mh0.Add(to), Bucket: bucket, Agent: agent}
						got := metricsQuery(t, st, p)
						p.Split = "no_such_key"
						want := metricsQuery(t, st, p)
						if g, w := jsonText(got.Series), jsonText(want.Series); g != w {
							t.Fatalf("%s: metrics %+v:\n got %s\nwant %s (recomputed without the hour table)", when, p, g, w)
						}
					}
				}
			}
		}
	}
	check("cold")
	check("warm")
	// A step appended into a past hour (as import, copy and fill write).
	mustAppend(t, st, step("hb", "rb1", 80*time.Minute, steptype.KindError, steptype.StepFailed))
	check("after a step appended into a past hour")
	imported := step("hc", "rc1", 3*time.Hour+40*time.Minute, llm, done)
	imported.Sequence = 4
	if err := st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{imported}}); err != nil {
		t.Fatalf("StepImport: %v", err)
	}
	check("after a step imported into a past hour")
	// Steps and an eval naming a run that is not there yet, then the
	// run, of another agent than the session's (copy writes runs after
	// steps): the agent of the steps changes.
	s := step("ha", "rh", 2*time.Hour+50*time.Minute, llm, done)
	s.Sequence = 5
	if err := st.StepImport(ctx, &store.StepImportParams{Steps: []*steptype.Step{s}}); err != nil {
		t.Fatalf("StepImport: %v", err)
	}
	check("after a step of a run not yet there")
	if err := st.RunImport(ctx, &store.RunImportParams{Runs: []*steptype.Run{{ID: "rh", SessionID: "ha", Agent: "c",
		Status: steptype.RunCancelled, CreatedAt: mh0.Add(2*time.Hour + 49*time.Minute)}}}); err != nil {
		t.Fatalf("RunImport: %v", err)
	}
	check("after its run, of another agent, imported")
	mustRun(t, st, &steptype.Run{ID: "rb2", SessionID: "hb", Agent: "b", Status: steptype.RunFailed,
		CreatedAt: mh0.Add(80 * time.Minute), FinishedAt: mh0.Add(3*time.Hour + 5*time.Minute + 123*time.Microsecond)})
	check("after a run finished in a past hour")
	if _, err := truncate(st, t, "ha", 4); err != nil {
		t.Fatal(err)
	}
	check("after a truncate")
	if _, err := st.StepResolve(ctx, &store.StepResolveParams{ID: waiting.ID, RunID: "rw", Status: steptype.StepFailed,
		Content: "no", Now: mh0.Add(5*time.Hour + 10*time.Minute), FailRun: &steptype.StepError{Message: "expired"}}); err != nil {
		t.Fatal(err)
	}
	check("after a waiting step failed, and its run with it")
	eval("rc1", 3*time.Hour+50*time.Minute, 1)
	check("after an eval")
	if err := st.SessionDelete(ctx, &store.SessionDeleteParams{ID: "hb"}); err != nil {
		t.Fatal(err)
	}
	check("after a session delete")
	prune(t, st, retention.Params{OlderThan: time.Hour, Agent: "c", Now: mh0.Add(1000 * time.Hour)})
	check("after a prune")
}
