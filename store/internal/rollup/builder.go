// Package rollup holds what the store drivers share to answer
// store.MetricsStore: the builder that buckets, zero-fills and shapes the
// partial aggregates a driver computes, the split of a range into partial
// and whole minutes, percentiles, and the helpers of the table of
// complete hours (folding hours, compensated sums, packed run durations).
// Only drivers import it.
package rollup

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// Part is one part of a range as drivers with per-minute rollups
// read it: whole minutes from the rollups, the partial minutes at either
// end from the steps. From and To are unix nanoseconds, To exclusive.
type Part struct {
	From, To int64
	Rollup   bool
}

// Parts splits [p.From, p.To) into the partial minute at its start,
// the whole minutes, and the partial minute at its end (empty parts left
// out).
func Parts(p *store.MetricsParams) []Part {
	return PartsOf(p.From.UnixNano(), p.To.UnixNano())
}

// Builder collects the partial aggregates a driver computes and
// builds the zero-filled series. Buckets are indexes from the start
// (store.MetricsParams.Start); keys are raw JSON texts of the metadata value (or ""
// when absent), normalized by the builder.
type Builder struct {
	p      *store.MetricsParams
	n      int
	series map[string]*builderSeries
}

type builderSeries struct {
	points    []store.MetricsPoint
	latencies [][]float64
	evalSum   []float64
	evalN     []int64
}

// NewBuilder returns a builder for the normalized p.
func NewBuilder(p *store.MetricsParams) *Builder {
	return &Builder{p: p, n: int(p.Buckets()), series: map[string]*builderSeries{}}
}

// Index returns the bucket index of t, and false when t is outside
// [From, To).
func (b *Builder) Index(t time.Time) (int, bool) {
	if t.Before(b.p.From) || !t.Before(b.p.To) {
		return 0, false
	}
	return int(t.Sub(b.p.Start()) / b.p.Bucket.Duration()), true
}

// SplitKey returns the normalized split value of a metadata value given as
// JSON text: the string itself for a JSON string, "" for null or nothing,
// the JSON text otherwise.
func SplitKey(raw string) string {
	if raw == "" || raw == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal([]byte(raw), &s) == nil {
		return s
	}
	return raw
}

// SplitKeyOf returns the normalized split value of key in a metadata object.
func SplitKeyOf(metadata json.RawMessage, key string) string {
	if key == "" || len(metadata) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return ""
	}
	return SplitKey(string(m[key]))
}

func (b *Builder) at(i int, rawKey string) (*builderSeries, bool) {
	if i < 0 || i >= b.n {
		return nil, false
	}
	k := ""
	if b.p.Split != "" {
		k = SplitKey(rawKey)
	}
	s := b.series[k]
	if s == nil {
		s = &builderSeries{points: make([]store.MetricsPoint, b.n), latencies: make([][]float64, b.n),
			evalSum: make([]float64, b.n), evalN: make([]int64, b.n)}
		b.series[k] = s
	}
	return s, true
}

// AddSteps adds step aggregates to bucket i of series key.
func (b *Builder) AddSteps(i int, key string, steps, errors, inTok, outTok int64, cost float64) {
	if s, ok := b.at(i, key); ok {
		pt := &s.points[i]
		pt.Steps += steps
		pt.Errors += errors
		pt.InputTokens += inTok
		pt.OutputTokens += outTok
		pt.Cost += cost
	}
}

// AddRuns adds finished runs to bucket i of series key.
func (b *Builder) AddRuns(i int, key string, runs, failed int64) {
	if s, ok := b.at(i, key); ok {
		s.points[i].Runs += runs
		s.points[i].RunsFailed += failed
	}
}

// AddLatency records one run latency, for drivers that leave percentiles to
// the builder.
func (b *Builder) AddLatency(i int, key string, ms float64) {
	if s, ok := b.at(i, key); ok {
		s.latencies[i] = append(s.latencies[i], ms)
	}
}

// SetLatency sets the percentiles a driver computed itself.
func (b *Builder) SetLatency(i int, key string, p50, p95, p99 float64) {
	if s, ok := b.at(i, key); ok {
		s.points[i].LatencyP50Ms, s.points[i].LatencyP95Ms, s.points[i].LatencyP99Ms = p50, p95, p99
	}
}

// AddEvals adds n eval scores summing to sum to bucket i of series key.
func (b *Builder) AddEvals(i int, key string, sum float64, n int64) {
	if s, ok := b.at(i, key); ok {
		s.evalSum[i] += sum
		s.evalN[i] += n
	}
}

// Result returns the series, ordered by key; without any data, one series
// with the key "" and zero points.
func (b *Builder) Result() *store.Metrics {
	if len(b.series) == 0 {
		b.at(0, "")
	}
	out := &store.Metrics{Bucket: b.p.Bucket, From: b.p.From, To: b.p.To, Agent: b.p.Agent, Split: b.p.Split}
	keys := make([]string, 0, len(b.series))
	for k := range b.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	start, d := b.p.Start(), b.p.Bucket.Duration()
	for _, k := range keys {
		s := b.series[k]
		for i := range s.points {
			pt := &s.points[i]
			pt.T = start.Add(time.Duration(i) * d)
			if pt.Steps > 0 {
				pt.ErrorRate = float64(pt.Errors) / float64(pt.Steps)
			}
			if l := s.latencies[i]; len(l) > 0 {
				slices.Sort(l) // linear when one sorted list of the hour table filled it
				pt.LatencyP50Ms, pt.LatencyP95Ms, pt.LatencyP99Ms = Percentile(l, 0.5), Percentile(l, 0.95), Percentile(l, 0.99)
			}
			if s.evalN[i] > 0 {
				avg := s.evalSum[i] / float64(s.evalN[i])
				pt.EvalScoreAvg = &avg
			}
		}
		out.Series = append(out.Series, store.MetricsSeries{Key: k, Points: s.points})
	}
	return out
}

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted values with linear
// interpolation between closest ranks, as PostgreSQL's percentile_cont.
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := math.Floor(pos)
	i := int(lo)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-lo)*(sorted[i+1]-sorted[i])
}
