package wire

import (
	"encoding/json"

	"github.com/stepwise-run/stepwise/steptype"
)

// InitiateRequest is the body of POST /v1/runs.
type InitiateRequest struct {
	Agent     string          `json:"agent"`
	Input     string          `json:"input"`
	SessionID string          `json:"session_id,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Title     string          `json:"title,omitempty"`
	Continue  bool            `json:"continue,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	// Breakpoints pause the run before or after chosen steps.
	Breakpoints *Breakpoints `json:"breakpoints,omitempty"`
}

// RunCreated answers the endpoints that start a run.
type RunCreated struct {
	Run        *steptype.Run `json:"run"`
	Invocation *Invocation   `json:"invocation"`
}

// CancelRequest is the body of POST /v1/runs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// AnswerRequest is the body of POST /v1/runs/{id}/inputs/{request}.
type AnswerRequest struct {
	Answer json.RawMessage `json:"answer"`
}

// AnswerResult answers POST /v1/runs/{id}/inputs/{request}: the answered
// input step.
type AnswerResult struct {
	Step *steptype.Step `json:"step"`
}

// PendingList is the body of GET /v1/inputs and GET /v1/runs/{id}/inputs.
type PendingList struct {
	Inputs []*PendingInput `json:"inputs"`
}
