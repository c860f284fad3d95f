package wire

import "github.com/stepwise-run/stepwise/store"

// Eval is an evaluation of a step, run or session, as the store keeps it.
type Eval = store.Eval

// EvalList is the body of the endpoints that list or make evals (POST
// /v1/runs/{id}/judge, POST /v1/sessions/{id}/judge).
type EvalList struct {
	Evals []*Eval `json:"evals"`
}

// MetricsParams select the time series of GET /v1/metrics.
type MetricsParams = store.MetricsParams

// Metrics is the body of GET /v1/metrics.
type Metrics = store.Metrics
