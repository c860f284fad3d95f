package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// SeedMetrics writes steps steps spread evenly over the 24 hours before
// end: sessions of 100 steps (one run each, agent "a" or "b", metadata tier
// gold, silver or free), one in ten steps an error, every llm step with
// usage and cost. It is the data set of BenchMetrics.
func SeedMetrics(tb testing.TB, st store.Store, steps int, end time.Time) {
	ctx := tb.Context()
	const per = 100
	sessions := max(steps/per, 1)
	span := 24 * time.Hour / time.Duration(sessions)
	tiers := []string{"gold", "silver", "free"}
	start := end.Add(-24 * time.Hour)
	for i := range sessions {
		id := fmt.Sprintf("m%07d", i)
		at := start.Add(time.Duration(i) * span)
		meta, _ := json.Marshal(map[string]string{"tier": tiers[i%3]})
		if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: id, Agent: "a", Metadata: meta, Now: at}); err != nil {
			tb.Fatal(err)
		}
		agent := "a"
		if i%2 == 1 {
			agent = "b"
		}
		status := steptype.RunCompleted
		if i%7 == 0 {
			status = steptype.RunFailed
		}
		stepGap := span / per
		fin := at.Add(per * stepGap)
		if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: id, SessionID: id, Agent: agent,
			Status: status, CreatedAt: at, FinishedAt: fin}}); err != nil {
			tb.Fatal(err)
		}
		batch := make([]*steptype.Step, 0, per)
		for j := range per {
			s := benchStep(id, fmt.Sprintf("%s-%03d", id, j))
			s.CreatedAt = at.Add(time.Duration(j) * stepGap)
			if j%10 == 9 {
				s.Kind, s.Status, s.Role, s.Metrics = steptype.KindError, steptype.StepFailed, steptype.RoleNone, steptype.Metrics{}
				s.Error = &steptype.StepError{Message: "rate limited", Class: "transient"}
			}
			batch = append(batch, s)
		}
		if _, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: batch}); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchMetrics measures MetricsStore.Metrics over the data of SeedMetrics
// (already written, ending at end): the last 24 hours in hour buckets for
// all agents, the same split by tier, and one agent in minute buckets.
func BenchMetrics(b *testing.B, st store.Store, end time.Time) {
	for _, c := range []struct {
		name string
		p    store.MetricsParams
	}{
		{"24h-hour", store.MetricsParams{To: end}},
		{"24h-hour-split", store.MetricsParams{To: end, Split: "tier"}},
		{"24h-minute-agent", store.MetricsParams{To: end, Bucket: store.BucketMinute, Agent: "a"}},
		{"1h-minute", store.MetricsParams{From: end.Add(-time.Hour), To: end, Bucket: store.BucketMinute}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var steps int64
			for b.Loop() {
				p := c.p
				if err := p.Normalize(); err != nil {
					b.Fatal(err)
				}
				m, err := st.Metrics(b.Context(), &p)
				if err != nil {
					b.Fatal(err)
				}
				steps = 0
				for _, s := range m.Series {
					for _, pt := range s.Points {
						steps += pt.Steps
					}
				}
			}
			b.ReportMetric(float64(steps), "steps/query")
		})
	}
}
