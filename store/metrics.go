package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"
)

// MetricsStore is the part of Store that aggregates its runs,
// steps and evals into time series (docs/analytics.md): run counts, failed
// runs, steps, errors, tokens, cost, run latency percentiles and the average
// eval score, per time bucket, for one agent or all, optionally split by a
// key of the session metadata. Drivers aggregate in the database where they
// can and report partial aggregates to a MetricsBuilder, which owns the
// bucketing, zero filling and the shape of the result.
type MetricsStore interface {
	// Metrics aggregates the data in [p.From, p.To). p must have been
	// normalized (MetricsParams.Normalize).
	Metrics(ctx context.Context, p *MetricsParams) (*Metrics, error)
}

// MetricsBucket is the width of one time bucket.
type MetricsBucket string

// Bucket widths.
const (
	BucketMinute MetricsBucket = "minute"
	BucketHour   MetricsBucket = "hour"
	BucketDay    MetricsBucket = "day"
)

// Duration returns the width of the bucket, or 0 for an unknown name.
func (b MetricsBucket) Duration() time.Duration {
	switch b {
	case BucketMinute:
		return time.Minute
	case BucketHour:
		return time.Hour
	case BucketDay:
		return 24 * time.Hour
	}
	return 0
}

// MaxMetricsBuckets bounds the number of buckets one query may ask for.
const MaxMetricsBuckets = 2000

// splitKeyRE is what a metadata key used as a split may look like.
var splitKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// MetricsParams are the parameters of MetricsStore.Metrics.
type MetricsParams struct {
	Agent  string        // only runs of this agent (and their steps and evals); empty = all
	From   time.Time     // inclusive; default To − 24h
	To     time.Time     // exclusive; default now
	Bucket MetricsBucket // default hour
	Split  string        // session metadata key to split by; empty = one series
	Now    time.Time     // the default of To; zero means time.Now()
}

// Normalize fills the defaults and validates p: a known bucket, From before
// To, at most MaxMetricsBuckets buckets, a split key of letters, digits and
// "_.-". Errors wrap ErrInvalid.
func (p *MetricsParams) Normalize() error {
	if p.Bucket == "" {
		p.Bucket = BucketHour
	}
	d := p.Bucket.Duration()
	if d == 0 {
		return fmt.Errorf("%w: bucket %q: want minute, hour or day", ErrInvalid, p.Bucket)
	}
	if p.To.IsZero() {
		p.To = p.Now
		if p.To.IsZero() {
			p.To = time.Now()
		}
	}
	if p.From.IsZero() {
		p.From = p.To.Add(-24 * time.Hour)
	}
	p.From, p.To = p.From.UTC(), p.To.UTC()
	if !p.From.Before(p.To) {
		return fmt.Errorf("%w: from %s is not before to %s", ErrInvalid, p.From.Format(time.RFC3339), p.To.Format(time.RFC3339))
	}
	if n := p.buckets(); n > MaxMetricsBuckets {
		return fmt.Errorf("%w: %d %s buckets between from and to (max %d): use a wider bucket or a shorter range", ErrInvalid, n, p.Bucket, MaxMetricsBuckets)
	}
	if p.Split != "" && !splitKeyRE.MatchString(p.Split) {
		return fmt.Errorf("%w: split key %q: want 1 to 64 letters, digits, '_', '.' or '-'", ErrInvalid, p.Split)
	}
	return nil
}

// Start returns the start of the first bucket: From truncated to the bucket
// width (UTC).
func (p *MetricsParams) Start() time.Time { return p.From.Truncate(p.Bucket.Duration()) }

func (p *MetricsParams) buckets() int64 {
	d := p.Bucket.Duration()
	return int64((p.To.Sub(p.Start()) + d - 1) / d)
}

// MetricsPart is one part of a range as drivers with per-minute rollups
// read it: whole minutes from the rollups, the partial minutes at either
// end from the steps. From and To are unix nanoseconds, To exclusive.
type MetricsPart struct {
	From, To int64
	Rollup   bool
}

// MetricsParts splits [p.From, p.To) into the partial minute at its start,
// the whole minutes, and the partial minute at its end (empty parts left
// out).
func MetricsParts(p *MetricsParams) []MetricsPart {
	return MetricsPartsOf(p.From.UnixNano(), p.To.UnixNano())
}

// Metrics is the answer of MetricsStore.Metrics (and of GET /v1/metrics).
type Metrics struct {
	Bucket MetricsBucket   `json:"bucket"`
	From   time.Time       `json:"from"`
	To     time.Time       `json:"to"`
	Agent  string          `json:"agent"`
	Split  string          `json:"split"`
	Series []MetricsSeries `json:"series"`
}

// MetricsSeries is the points of one split value ("" without a split, and for
// sessions that lack the key), one point per bucket, oldest first.
type MetricsSeries struct {
	Key    string         `json:"key"`
	Points []MetricsPoint `json:"points"`
}

// MetricsPoint is the aggregate of one bucket. Runs, RunsFailed and the
// latencies count the runs that finished in the bucket (latency = finished −
// created); Steps, Errors, tokens and cost the steps committed in it (an error
// is a step of kind error or in status failed); EvalScoreAvg the evals created
// in it (nil when there is none).
type MetricsPoint struct {
	T            time.Time `json:"t"`
	Runs         int64     `json:"runs"`
	RunsFailed   int64     `json:"runs_failed"`
	Steps        int64     `json:"steps"`
	Errors       int64     `json:"errors"`
	ErrorRate    float64   `json:"error_rate"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	Cost         float64   `json:"cost"`
	LatencyP50Ms float64   `json:"latency_p50_ms"`
	LatencyP95Ms float64   `json:"latency_p95_ms"`
	LatencyP99Ms float64   `json:"latency_p99_ms"`
	EvalScoreAvg *float64  `json:"eval_score_avg"`
}

// MetricsBuilder collects the partial aggregates a driver computes and
// builds the zero-filled series. Buckets are indexes from the start
// (MetricsParams.Start); keys are raw JSON texts of the metadata value (or ""
// when absent), normalized by the builder.
type MetricsBuilder struct {
	p      *MetricsParams
	n      int
	series map[string]*builderSeries
}

type builderSeries struct {
	points    []MetricsPoint
	latencies [][]float64
	evalSum   []float64
	evalN     []int64
}

// NewMetricsBuilder returns a builder for the normalized p.
func NewMetricsBuilder(p *MetricsParams) *MetricsBuilder {
	return &MetricsBuilder{p: p, n: int(p.buckets()), series: map[string]*builderSeries{}}
}

// Index returns the bucket index of t, and false when t is outside
// [From, To).
func (b *MetricsBuilder) Index(t time.Time) (int, bool) {
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

func (b *MetricsBuilder) at(i int, rawKey string) (*builderSeries, bool) {
	if i < 0 || i >= b.n {
		return nil, false
	}
	k := ""
	if b.p.Split != "" {
		k = SplitKey(rawKey)
	}
	s := b.series[k]
	if s == nil {
		s = &builderSeries{points: make([]MetricsPoint, b.n), latencies: make([][]float64, b.n),
			evalSum: make([]float64, b.n), evalN: make([]int64, b.n)}
		b.series[k] = s
	}
	return s, true
}

// AddSteps adds step aggregates to bucket i of series key.
func (b *MetricsBuilder) AddSteps(i int, key string, steps, errors, inTok, outTok int64, cost float64) {
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
func (b *MetricsBuilder) AddRuns(i int, key string, runs, failed int64) {
	if s, ok := b.at(i, key); ok {
		s.points[i].Runs += runs
		s.points[i].RunsFailed += failed
	}
}

// AddLatency records one run latency, for drivers that leave percentiles to
// the builder.
func (b *MetricsBuilder) AddLatency(i int, key string, ms float64) {
	if s, ok := b.at(i, key); ok {
		s.latencies[i] = append(s.latencies[i], ms)
	}
}

// SetLatency sets the percentiles a driver computed itself.
func (b *MetricsBuilder) SetLatency(i int, key string, p50, p95, p99 float64) {
	if s, ok := b.at(i, key); ok {
		s.points[i].LatencyP50Ms, s.points[i].LatencyP95Ms, s.points[i].LatencyP99Ms = p50, p95, p99
	}
}

// AddEvals adds n eval scores summing to sum to bucket i of series key.
func (b *MetricsBuilder) AddEvals(i int, key string, sum float64, n int64) {
	if s, ok := b.at(i, key); ok {
		s.evalSum[i] += sum
		s.evalN[i] += n
	}
}

// Result returns the series, ordered by key; without any data, one series
// with the key "" and zero points.
func (b *MetricsBuilder) Result() *Metrics {
	if len(b.series) == 0 {
		b.at(0, "")
	}
	out := &Metrics{Bucket: b.p.Bucket, From: b.p.From, To: b.p.To, Agent: b.p.Agent, Split: b.p.Split}
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
		out.Series = append(out.Series, MetricsSeries{Key: k, Points: s.points})
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
