package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/llm"
)

// statusCode maps the canonical google.rpc codes to the HTTP status they
// come with, to classify an error that arrives inside a 200 stream.
var statusCode = map[string]int{
	"INVALID_ARGUMENT":    400,
	"FAILED_PRECONDITION": 400,
	"OUT_OF_RANGE":        400,
	"UNAUTHENTICATED":     401,
	"PERMISSION_DENIED":   403,
	"NOT_FOUND":           404,
	"ABORTED":             409,
	"ALREADY_EXISTS":      409,
	"RESOURCE_EXHAUSTED":  429,
	"CANCELLED":           499,
	"UNKNOWN":             500,
	"INTERNAL":            500,
	"DATA_LOSS":           500,
	"UNIMPLEMENTED":       501,
	"UNAVAILABLE":         503,
	"DEADLINE_EXCEEDED":   504,
}

// APIError is the google.rpc status the API answered with: the cause
// (errors.As) of the *llm.Error of a failed call.
type APIError struct {
	// StatusCode is the HTTP status (for an error inside a stream, the
	// status's code field).
	StatusCode int
	// Status and Message are the status's, e.g. "RESOURCE_EXHAUSTED";
	// Status is empty when the body had another shape.
	Status, Message string
	// Reason is the ErrorInfo reason among the details, e.g.
	// "API_KEY_INVALID", if any.
	Reason string
	// RetryDelay is the RetryInfo delay among the details, 0 if none.
	RetryDelay time.Duration
}

// Error returns the status code, status and message.
func (e *APIError) Error() string {
	s := "gemini: " + strconv.Itoa(e.StatusCode)
	if e.Status != "" {
		s += " " + e.Status
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// callError converts the failure of the request that opens a stream.
func (m *Model) callError(ctx, callCtx context.Context, raw *http.Response, err error) error {
	if err == nil && raw.StatusCode >= 400 {
		return httpError(raw)
	}
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		return cerr
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return le // no access token
	}
	return llm.TransportError(err)
}

// cancelled returns ctx's error, a per-call timeout error, or nil; see
// llm.Cancelled.
func (m *Model) cancelled(ctx, callCtx context.Context) error {
	return llm.Cancelled(ctx, callCtx, m.cfg.Timeout)
}

// httpError converts an error status, classified by llm.ClassifyHTTP, and
// closes the body. The delay to wait is the Retry-After header, else the
// body's RetryInfo.
func httpError(raw *http.Response) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	apiErr := parseError(raw.StatusCode, body)
	e := llm.StatusError(raw.StatusCode, raw.Header, apiErr.Message, apiErr)
	if e.RetryAfter == 0 {
		e.RetryAfter = apiErr.RetryDelay
	}
	return e
}

// statusError converts a google.rpc status found inside a stream,
// classified as if it had come with its HTTP status.
func statusError(st *rpcStatus) *llm.Error {
	apiErr := fromStatus(st)
	status := st.Code
	if c, ok := statusCode[st.Status]; ok && (status < 400 || status > 599) {
		status = c
	}
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError // an unknown failure of the server
	}
	apiErr.StatusCode = status
	class, code := llm.ClassifyHTTP(status)
	msg := apiErr.Message
	if msg == "" {
		msg = "error in stream"
	}
	return &llm.Error{Class: class, Code: code, RetryAfter: apiErr.RetryDelay, Message: msg, Err: apiErr}
}

// parseError reads an error body: a google.rpc status object, or an
// array of them (the JSON-array form of streamGenerateContent). The
// message is the raw body, shortened, when it has another shape.
func parseError(status int, body []byte) *APIError {
	var one struct {
		Error *rpcStatus `json:"error"`
	}
	var many []struct {
		Error *rpcStatus `json:"error"`
	}
	if json.Unmarshal(body, &one) == nil && one.Error != nil {
		e := fromStatus(one.Error)
		e.StatusCode = status
		return e
	}
	if json.Unmarshal(body, &many) == nil && len(many) > 0 && many[0].Error != nil {
		e := fromStatus(many[0].Error)
		e.StatusCode = status
		return e
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return &APIError{StatusCode: status, Message: s}
}

func fromStatus(st *rpcStatus) *APIError {
	e := &APIError{StatusCode: st.Code, Status: st.Status, Message: st.Message}
	for _, d := range st.Details {
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			e.RetryDelay = parseDuration(d.RetryDelay)
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && e.Reason == "":
			e.Reason = d.Reason
		}
	}
	return e
}

// parseDuration reads a google.protobuf.Duration in its JSON form, seconds
// with an "s" suffix ("30s", "1.5s"); 0 when absent, invalid or not
// positive, capped at 24 hours.
func parseDuration(s string) time.Duration {
	v, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0
	}
	return time.Duration(min(f, 24*3600) * float64(time.Second))
}
