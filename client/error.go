package client

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// Error is an error response of the server: its RFC 9457 problem details.
// errors.Is matches it against the stepwise sentinels its code stands for
// (see Is).
type Error struct {
	Status int    // HTTP status
	Code   string // stable problem code, e.g. "not_found"
	Title  string
	Detail string // what went wrong, for a human
	Type   string // problem type URI
}

// Error formats the status, code and detail.
func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("stepwise server: %d %s: %s", e.Status, e.Code, e.Detail)
	}
	return fmt.Sprintf("stepwise server: %d %s", e.Status, e.Code)
}

// codeSentinels maps problem codes to the errors they stand for.
var codeSentinels = map[string][]error{
	"not_found":           {stepwise.ErrNotFound},
	"route_not_found":     {stepwise.ErrNotFound},
	"unknown_agent":       {stepwise.ErrUnknownAgent, stepwise.ErrNotFound},
	"conflict":            {stepwise.ErrConflict},
	"already_answered":    {stepwise.ErrAlreadyAnswered, stepwise.ErrConflict},
	"run_finished":        {stepwise.ErrRunFinished, stepwise.ErrConflict},
	"not_waiting":         {stepwise.ErrNotWaiting, stepwise.ErrConflict},
	"invalid_answer":      {stepwise.ErrInvalidAnswer, store.ErrInvalid},
	"invalid_argument":    {store.ErrInvalid},
	"unavailable":         {stepwise.ErrEngineClosed},
	"storage_full":        {store.ErrStorageFull},
	"storage_unavailable": {store.ErrUnavailable},
}

// Is reports whether the error stands for target: stepwise.ErrNotFound for
// 404s, stepwise.ErrConflict for 409s, and the specific sentinel of the
// code (stepwise.ErrAlreadyAnswered, ErrRunFinished, ErrInvalidAnswer,
// ErrUnknownAgent, ErrNotWaiting, store.ErrInvalid, ErrEngineClosed,
// store.ErrStorageFull, store.ErrUnavailable).
func (e *Error) Is(target error) bool {
	for _, s := range codeSentinels[e.Code] {
		if s == target {
			return true
		}
	}
	switch e.Status {
	case http.StatusNotFound:
		return target == stepwise.ErrNotFound
	case http.StatusConflict:
		return target == stepwise.ErrConflict
	}
	return false
}

// decodeError builds the error of a non-2xx response body.
func decodeError(status int, body []byte) *Error {
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Code   string `json:"code"`
	}
	e := &Error{Status: status}
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code, e.Title, e.Detail, e.Type = p.Code, p.Title, p.Detail, p.Type
		return e
	}
	e.Code, e.Title = "http_"+fmt.Sprint(status), http.StatusText(status)
	if len(body) > 0 && len(body) < 512 {
		e.Detail = string(body)
	}
	return e
}
