package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testMetricsAgentOfRun checks whose agent a row counts for: a step or run
// counts for its run's agent (a hand-off run of agent b inside a session of
// agent a counts for b), a step outside any run for its session's agent;
// with and without a split, from the rollups (whole minutes) and from the
// steps (a range starting inside a minute).
func testMetricsAgentOfRun(t *testing.T, st store.Store) {
	ctx := t.Context()
	for _, s := range []struct{ id, agent, meta string }{{"s1", "a", `{"tier":"gold"}`}, {"s2", "b", ""}} {
		p := &store.SessionCreateParams{ID: s.id, Agent: s.agent, Now: mt0}
		if s.meta != "" {
			p.Metadata = json.RawMessage(s.meta)
		}
		if _, err := st.SessionCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct{ id, sess string }{{"r1", "s1"}, {"r2", "s2"}} {
		at := mt0.Add(time.Minute)
		mustRun(t, st, &steptype.Run{ID: r.id, SessionID: r.sess, Agent: "b", Status: steptype.RunCompleted, CreatedAt: at, FinishedAt: at.Add(2 * time.Second)})
	}
	for _, s := range []struct {
		id, sess, run string
		at            time.Duration
	}{
		{"h1", "s1", "r1", time.Minute + 10*time.Millisecond},
		{"h2", "s1", "r1", 3 * time.Minute},
		{"k1", "s2", "r2", 2 * time.Minute},
		{"o1", "s1", "", 4 * time.Minute},
	} {
		mustAppend(t, st, &steptype.Step{ID: s.id, SessionID: s.sess, RunID: s.run, Kind: steptype.KindLLM, Status: steptype.StepCompleted,
			CreatedAt: mt0.Add(s.at), Metrics: steptype.Metrics{InputTokens: 1, OutputTokens: 2, Cost: 0.5}})
	}
	type want struct{ steps, runs int64 }
	for _, from := range []time.Time{mt0, mt0.Add(time.Minute + 5*time.Millisecond)} {
		for _, c := range []struct {
			agent, split string
			want         map[string]want
		}{
			{"", "", map[string]want{"": {4, 2}}},
			{"b", "", map[string]want{"": {3, 2}}},
			{"a", "", map[string]want{"": {1, 0}}},
			{"b", "tier", map[string]want{"gold": {2, 1}, "": {1, 1}}},
			{"a", "tier", map[string]want{"gold": {1, 0}}},
			{"", "tier", map[string]want{"gold": {3, 1}, "": {1, 1}}},
		} {
			where := fmt.Sprintf("from %s, agent %q, split %q", from.Format("15:04:05.000"), c.agent, c.split)
			got := metricsQuery(t, st, store.MetricsParams{From: from, To: mt0.Add(time.Hour), Bucket: store.BucketHour, Agent: c.agent, Split: c.split})
			if len(got.Series) != len(c.want) {
				t.Fatalf("%s: %s, want %d series", where, jsonText(got), len(c.want))
			}
			for _, s := range got.Series {
				pt, w := s.Points[0], c.want[s.Key]
				if pt.Steps != w.steps || pt.Runs != w.runs || pt.InputTokens != w.steps || pt.OutputTokens != 2*w.steps || pt.Cost != 0.5*float64(w.steps) {
					t.Errorf("%s, series %q: %+v, want %d steps (1 in, 2 out tokens, 0.5 cost each) and %d runs", where, s.Key, pt, w.steps, w.runs)
				}
				if w.runs > 0 && pt.LatencyP50Ms != 2000 {
					t.Errorf("%s, series %q: p50 %v ms, want 2000", where, s.Key, pt.LatencyP50Ms)
				}
			}
		}
	}
}
