package store

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// MetricsStore is the part of Store that aggregates its runs,
// steps and evals into time series (docs/analytics.md): run counts, failed
// runs, steps, errors, tokens, cost, run latency percentiles and the average
// eval score, per time bucket, for one agent or all, optionally split by a
// key of the session metadata. Drivers aggregate in the database where they
// can and leave the bucketing, zero filling and the shape of the result to
// a shared builder (store/internal/rollup).
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
	if n := p.Buckets(); n > MaxMetricsBuckets {
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

// Buckets returns the number of buckets of [Start(), To).
func (p *MetricsParams) Buckets() int64 {
	d := p.Bucket.Duration()
	return int64((p.To.Sub(p.Start()) + d - 1) / d)
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
