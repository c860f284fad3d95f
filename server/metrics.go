package server

import (
	"net/http"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// registerMetricsAPI installs GET /v1/metrics: time-series analytics of runs,
// steps and evals (store.MetricsStore).
func (s *Server) registerMetricsAPI() {
	if !s.registered(http.MethodGet, "/v1/metrics") {
		s.handle(http.MethodGet, "/v1/metrics", s.metrics)
	}
}

// metricsParams parses the query of GET /v1/metrics
// (agent, from, to, bucket, split) into normalized store parameters; a bad
// value is a 400 problem.
func metricsParams(q map[string][]string, now time.Time) (*store.MetricsParams, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	p := &store.MetricsParams{Agent: get("agent"), Bucket: store.MetricsBucket(get("bucket")), Split: get("split"), Now: now}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &p.From}, {"to", &p.To}} {
		if v := get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return nil, badParam("%s %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", f.name, v)
			}
			*f.dst = t
		}
	}
	if err := p.Normalize(); err != nil {
		return nil, badParam("%v", trimSentinel(err))
	}
	return p, nil
}

// trimSentinel drops the "stepwise: invalid argument: " prefix of a
// validation error, for a problem detail.
func trimSentinel(err error) string {
	msg := err.Error()
	const prefix = "stepwise: invalid argument: "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}

// metrics answers GET /v1/metrics?agent=&from=&to=&bucket=&split=.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	p, err := metricsParams(r.URL.Query(), time.Now())
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	m, err := s.cfg.Engine.Store().Metrics(ctx, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// metricsOps documents the metrics endpoint.
func metricsOps() []apiOp {
	return []apiOp{{method: "GET", path: "/v1/metrics", id: "getMetrics",
		summary: "Time series of run counts, failures, steps, errors, tokens, cost, run latency percentiles and eval scores per bucket, optionally split by a session metadata key (400: bad parameter or more than 2000 buckets)",
		params: []apiParam{queryParam("agent", "string", "only this agent's runs, steps and evals; default all"),
			queryParam("from", "string", "RFC 3339 start (inclusive); default to − 24h"), queryParam("to", "string", "RFC 3339 end (exclusive); default now"),
			queryParam("bucket", "string", "minute, hour (default) or day"), queryParam("split", "string", "session metadata key: one series per value")},
		status: 200, resp: "Metrics", errors: []int{400, 401}}}
}

// metricsSchemas documents store.Metrics.
func metricsSchemas() obj {
	n := obj{"type": []any{"number", "null"}, "description": "average eval score in the bucket; null when no eval was made"}
	point := object(false, []string{"t", "runs", "runs_failed", "steps", "errors", "error_rate", "input_tokens", "output_tokens", "cost",
		"latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "eval_score_avg"}, obj{
		"t": timeStr(), "runs": integer(), "runs_failed": integer(), "steps": integer(), "errors": integer(), "error_rate": number(),
		"input_tokens": integer(), "output_tokens": integer(), "cost": number(),
		"latency_p50_ms": number(), "latency_p95_ms": number(), "latency_p99_ms": number(), "eval_score_avg": n,
	})
	return obj{"Metrics": object(false, []string{"bucket", "from", "to", "agent", "split", "series"}, obj{
		"bucket": str("minute, hour or day"), "from": timeStr(), "to": timeStr(), "agent": str("the agent filter, \"\" for all"),
		"split": str("the metadata key, \"\" without a split"),
		"series": arrayOf(object(false, []string{"key", "points"}, obj{
			"key": str("the metadata value (\"\" without a split or when a session lacks the key)"), "points": arrayOf(point),
		})),
	})}
}
