package wire

import (
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

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

// ScoreRequest is the body of POST /v1/{steps,runs,sessions}/{id}/evals: a
// user's score.
type ScoreRequest struct {
	Score       *float64 `json:"score"`
	Name        string   `json:"name"`
	Label       string   `json:"label"`
	Description string   `json:"description"`
	Author      string   `json:"author"`
	// Source may only be "user" (the dashboard sends it).
	Source string `json:"source"`
}

// AttachmentList is the body of GET /v1/steps/{id}/attachments.
type AttachmentList struct {
	Attachments []*store.Attachment `json:"attachments"`
}

// StepEventList is the body of GET /v1/steps/{id}/events: the events
// inside a step, in order.
type StepEventList struct {
	Events []*store.StepEvent `json:"events"`
}

// AnnotationView is a step's effective annotations: those it committed
// with, overlaid by the rows set through the API.
type AnnotationView struct {
	StepID      string               `json:"step_id"`
	Annotations steptype.Annotations `json:"annotations"`
}

// AnnotationRequest is the body of PUT /v1/steps/{id}/annotations: fields
// left out are kept, "" clears a field set through the API.
type AnnotationRequest struct {
	State  *string `json:"state"`
	Goal   *string `json:"goal"`
	Action *string `json:"action"`
}

// DatasetList is the body of GET /v1/datasets.
type DatasetList struct {
	Datasets []*store.Dataset `json:"datasets"`
}

// LineError is a JSONL line left out of a dataset import.
type LineError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// ImportResult answers POST /v1/datasets.
type ImportResult struct {
	Dataset  *store.Dataset `json:"dataset,omitempty"`
	Imported int            `json:"imported"`
	Errors   []LineError    `json:"errors"`
}

// ExperimentList is the body of GET /v1/experiments.
type ExperimentList struct {
	Experiments []*store.Experiment `json:"experiments"`
}
