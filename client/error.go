package client

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise/wire"
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
	wire.CodeNotFound:        {wire.ErrNotFound},
	wire.CodeRouteNotFound:   {wire.ErrNotFound},
	wire.CodeUnknownAgent:    {wire.ErrUnknownAgent, wire.ErrNotFound},
	wire.CodeConflict:        {wire.ErrConflict},
	wire.CodeAlreadyAnswered: {wire.ErrAlreadyAnswered, wire.ErrConflict},
	wire.CodeRunFinished:     {wire.ErrRunFinished, wire.ErrConflict},
	wire.CodeNotWaiting:      {wire.ErrNotWaiting, wire.ErrConflict},
	wire.CodeInvalidAnswer:   {wire.ErrInvalidAnswer, wire.ErrInvalid},
	wire.CodeInvalidArgument: {wire.ErrInvalid},
	wire.CodeUnavailable:     {wire.ErrEngineClosed},
	wire.CodeStorageFull:     {wire.ErrStorageFull},
	wire.CodeStorageDown:     {wire.ErrUnavailable},
}

// Is reports whether the error stands for target: wire.ErrNotFound for
// 404s, wire.ErrConflict for 409s, and the specific sentinel of the
// code (wire.ErrAlreadyAnswered, ErrRunFinished, ErrInvalidAnswer,
// ErrUnknownAgent, ErrNotWaiting, wire.ErrInvalid, ErrEngineClosed,
// wire.ErrStorageFull, wire.ErrUnavailable).
func (e *Error) Is(target error) bool {
	for _, s := range codeSentinels[e.Code] {
		if s == target {
			return true
		}
	}
	switch e.Status {
	case http.StatusNotFound:
		return target == wire.ErrNotFound
	case http.StatusConflict:
		return target == wire.ErrConflict
	}
	return false
}

// decodeError builds the error of a non-2xx response body.
func decodeError(status int, body []byte) *Error {
	var p wire.Problem
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
