package storetest

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testMetrics runs the store.MetricsStore contract; every driver must
// implement it (the metrics API, `stepwise metrics` and the dashboard use it).
func testMetrics(t *testing.T, h *harness) {
	h.sub(t, "Aggregates", func(t *testing.T, st store.Store) {
		seedMetrics(t, st)
		testMetricsAggregates(t, st)
	})
	h.sub(t, "AgentOfRun", func(t *testing.T, st store.Store) { testMetricsAgentOfRun(t, st) })
	h.sub(t, "Hours", func(t *testing.T, st store.Store) { testMetricsHours(t, st) })
	h.sub(t, "Empty", func(t *testing.T, st store.Store) {
		m := metricsQuery(t, st, store.MetricsParams{From: mt0, To: mt0.Add(3 * time.Minute), Bucket: store.BucketMinute})
		if len(m.Series) != 1 || m.Series[0].Key != "" || len(m.Series[0].Points) != 3 {
			t.Fatalf("empty store: %+v, want one series of 3 zero points", m)
		}
		if pt := m.Series[0].Points[0]; pt.Runs != 0 || pt.Steps != 0 || pt.EvalScoreAvg != nil || !pt.T.Equal(mt0) {
			t.Fatalf("empty point = %+v", pt)
		}
	})
}

// mt0 is the start of the metrics fixture: an hour boundary.
var mt0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

// seedMetrics writes three sessions (two of agent a with metadata tier gold
// and free, one of agent b without metadata), five runs and their steps,
// and, on observation stores, three evals.
func seedMetrics(t *testing.T, st store.Store) {
	t.Helper()
	ctx := t.Context()
	for _, s := range []struct{ id, agent, meta string }{{"sa", "a", `{"tier":"gold"}`}, {"sb", "a", `{"tier":"free","n":1}`}, {"sc", "b", ""}} {
		p := &store.SessionCreateParams{ID: s.id, Agent: s.agent, Now: mt0}
		if s.meta != "" {
			p.Metadata = json.RawMessage(s.meta)
		}
		if _, err := st.SessionCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ms := time.Millisecond
	for _, r := range []struct {
		id, sess, agent string
		status          steptype.RunStatus
		created, dur    time.Duration
	}{
		{"ra1", "sa", "a", steptype.RunCompleted, time.Minute, 100 * ms},
		{"ra2", "sa", "a", steptype.RunFailed, 5 * time.Minute, 300 * ms},
		{"rb1", "sb", "a", steptype.RunCompleted, 70 * time.Minute, 200 * ms},
		{"rc1", "sc", "b", steptype.RunCompleted, 10 * time.Minute, time.Second},
		{"rc2", "sc", "b", steptype.RunRunning, 20 * time.Minute, 0},
		{"rout", "sb", "a", steptype.RunCompleted, 3 * time.Hour, ms},
	} {
		run := &steptype.Run{ID: r.id, SessionID: r.sess, Agent: r.agent, Status: r.status, CreatedAt: mt0.Add(r.created)}
		if r.dur > 0 {
			run.FinishedAt = run.CreatedAt.Add(r.dur)
		}
		mustRun(t, st, run)
	}
	step := func(id, sess, run string, at time.Duration, kind steptype.Kind, in, out int64, cost float64) {
		s := &steptype.Step{ID: id, SessionID: sess, RunID: run, Kind: kind, Status: steptype.StepCompleted, CreatedAt: mt0.Add(at),
			Metrics: steptype.Metrics{InputTokens: in, OutputTokens: out, Cost: cost}}
		if kind == steptype.KindError {
			s.Status = steptype.StepFailed
			s.Error = &steptype.StepError{Message: "boom"}
		}
		mustAppend(t, st, s)
	}
	step("a1", "sa", "ra1", time.Minute+50*ms, steptype.KindLLM, 10, 5, 0.01)
	step("a2", "sa", "ra1", time.Minute+60*ms, steptype.KindTool, 0, 0, 0)
	step("a3", "sa", "ra2", 5*time.Minute+100*ms, steptype.KindError, 0, 0, 0)
	step("a4", "sa", "ra2", 5*time.Minute+200*ms, steptype.KindLLM, 20, 10, 0.02)
	step("c1", "sc", "rc1", 10*time.Minute, steptype.KindLLM, 100, 50, 1)
	step("b1", "sb", "rb1", 70*time.Minute, steptype.KindLLM, 7, 3, 0.5)
	step("b2", "sb", "rout", 3*time.Hour, steptype.KindLLM, 1000, 1000, 10)
	for _, e := range []struct {
		id   string
		kind store.EvalTarget
		tgt  string
		at   time.Duration
		sc   float64
	}{
		{"e1", store.TargetRun, "ra1", 2 * time.Minute, 0.8},
		{"e2", store.TargetStep, "c1", 11 * time.Minute, 0.4},
		{"e3", store.TargetSession, "sb", 71 * time.Minute, 1},
	} {
		_, err := st.EvalPut(ctx, &store.EvalPutParams{Now: mt0.Add(e.at), Eval: &store.Eval{ID: e.id, TargetKind: e.kind, TargetID: e.tgt,
			Name: "q", Source: store.SourceUser, Score: e.sc}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func metricsQuery(t *testing.T, ms store.MetricsStore, p store.MetricsParams) *store.Metrics {
	t.Helper()
	if err := p.Normalize(); err != nil {
		t.Fatalf("Normalize(%+v): %v", p, err)
	}
	m, err := ms.Metrics(t.Context(), &p)
	if err != nil {
		t.Fatalf("Metrics(%+v): %v", p, err)
	}
	return m
}

// wantPoint is the expected content of one point; evals < 0 means none.
type wantPoint struct {
	runs, failed, steps, errors, in, out int64
	cost, p50, p95, p99, evals           float64
}

func checkPoint(t *testing.T, where string, got store.MetricsPoint, want wantPoint) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	bad := got.Runs != want.runs || got.RunsFailed != want.failed || got.Steps != want.steps || got.Errors != want.errors ||
		got.InputTokens != want.in || got.OutputTokens != want.out || !near(got.Cost, want.cost) ||
		!near(got.LatencyP50Ms, want.p50) || !near(got.LatencyP95Ms, want.p95) || !near(got.LatencyP99Ms, want.p99)
	if want.steps > 0 && !near(got.ErrorRate, float64(want.errors)/float64(want.steps)) {
		bad = true
	}
	if want.evals < 0 {
		bad = bad || got.EvalScoreAvg != nil
	} else {
		bad = bad || got.EvalScoreAvg == nil || !near(*got.EvalScoreAvg, want.evals)
	}
	if bad {
		ev := "nil"
		if got.EvalScoreAvg != nil {
			ev = jsonText(*got.EvalScoreAvg)
		}
		t.Errorf("%s: got %+v (eval %s), want %+v", where, got, ev, want)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

func testMetricsAggregates(t *testing.T, st store.Store) {
	two := store.MetricsParams{From: mt0, To: mt0.Add(2 * time.Hour)}
	all := metricsQuery(t, st, two)
	if len(all.Series) != 1 || len(all.Series[0].Points) != 2 || all.Bucket != store.BucketHour {
		t.Fatalf("all agents: %s", jsonText(all))
	}
	checkPoint(t, "all/10:00", all.Series[0].Points[0], wantPoint{3, 1, 5, 1, 130, 65, 1.03, 300, 930, 986, 0.6})
	checkPoint(t, "all/11:00", all.Series[0].Points[1], wantPoint{1, 0, 1, 0, 7, 3, 0.5, 200, 200, 200, 1})
	if !all.Series[0].Points[1].T.Equal(mt0.Add(time.Hour)) {
		t.Errorf("second point t = %v", all.Series[0].Points[1].T)
	}

	a := two
	a.Agent = "a"
	got := metricsQuery(t, st, a)
	checkPoint(t, "a/10:00", got.Series[0].Points[0], wantPoint{2, 1, 4, 1, 30, 15, 0.03, 200, 290, 298, 0.8})

	a.Split = "tier"
	got = metricsQuery(t, st, a)
	if len(got.Series) != 2 || got.Series[0].Key != "free" || got.Series[1].Key != "gold" || got.Split != "tier" || got.Agent != "a" {
		t.Fatalf("agent a split by tier: %s", jsonText(got))
	}
	checkPoint(t, "free/11:00", got.Series[0].Points[1], wantPoint{1, 0, 1, 0, 7, 3, 0.5, 200, 200, 200, 1})
	checkPoint(t, "free/10:00", got.Series[0].Points[0], wantPoint{evals: -1})
	checkPoint(t, "gold/10:00", got.Series[1].Points[0], wantPoint{2, 1, 4, 1, 30, 15, 0.03, 200, 290, 298, 0.8})

	sp := two
	sp.Split = "n" // a number; sessions without it are ""
	got = metricsQuery(t, st, sp)
	if len(got.Series) != 2 || got.Series[0].Key != "" || got.Series[1].Key != "1" {
		t.Fatalf("split by a numeric key: %s", jsonText(got))
	}

	late := store.MetricsParams{From: mt0.Add(2 * time.Minute), To: mt0.Add(2 * time.Hour), Agent: "a"}
	got = metricsQuery(t, st, late)
	if pt := got.Series[0].Points[0]; pt.Runs != 1 || pt.Steps != 2 || !pt.T.Equal(mt0) {
		t.Errorf("from inside the first bucket: %+v, want only what happened after from (1 run, 2 steps), t = bucket start", pt)
	}

	// Ranges that start and end inside a minute (drivers with per-minute
	// rollups read those parts from the steps).
	mid := metricsQuery(t, st, store.MetricsParams{From: mt0.Add(time.Minute + 55*time.Millisecond), To: mt0.Add(70*time.Minute + time.Millisecond)})
	if pt0, pt1 := mid.Series[0].Points[0], mid.Series[0].Points[1]; pt0.Steps != 4 || pt0.InputTokens != 120 || pt1.Steps != 1 || pt1.Runs != 0 {
		t.Errorf("range 10:01:00.055 to 11:10:00.001: %+v / %+v, want 4 steps (120 input tokens) then 1 step and no run", pt0, pt1)
	}

	minutes := metricsQuery(t, st, store.MetricsParams{From: mt0, To: mt0.Add(2 * time.Hour), Bucket: store.BucketMinute})
	if n := len(minutes.Series[0].Points); n != 120 {
		t.Fatalf("minute buckets: %d points, want 120", n)
	}
	checkPoint(t, "minute 10:05", minutes.Series[0].Points[5], wantPoint{1, 1, 2, 1, 20, 10, 0.02, 300, 300, 300, -1})

	// Deleting steps takes them out of the aggregates.
	if _, err := st.StepTruncate(t.Context(), &store.StepTruncateParams{SessionID: "sa", StartSeq: 3}); err != nil {
		t.Fatal(err)
	}
	a.Split = ""
	got = metricsQuery(t, st, a)
	if pt := got.Series[0].Points[0]; pt.Steps != 2 || pt.Errors != 0 || pt.InputTokens != 10 || pt.Runs != 2 {
		t.Errorf("after truncating a3, a4: %+v, want 2 steps, 0 errors, 10 input tokens, still 2 runs", pt)
	}
	if err := st.SessionDelete(t.Context(), &store.SessionDeleteParams{ID: "sb"}); err != nil {
		t.Fatal(err)
	}
	got = metricsQuery(t, st, a)
	if pt := got.Series[0].Points[1]; pt.Steps != 0 || pt.Runs != 0 || pt.EvalScoreAvg != nil {
		t.Errorf("after deleting session sb: %+v, want an empty bucket", pt)
	}

	for _, bad := range []store.MetricsParams{
		{Bucket: "week"},
		{From: mt0, To: mt0},
		{From: mt0, To: mt0.Add(2001 * time.Minute), Bucket: store.BucketMinute},
		{Split: "a'b"},
	} {
		if err := bad.Normalize(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Normalize(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
