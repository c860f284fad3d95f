package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
)

// typeStatus maps the API's error types to the HTTP status they come with,
// to classify error events, which arrive on a 200 stream.
var typeStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

// callError converts the failure of the request that opens a stream.
func (m *Model) callError(ctx, callCtx context.Context, raw *http.Response, err error) error {
	if err == nil && raw.StatusCode >= 400 {
		return httpError(raw)
	}
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		return cerr
	}
	return transportError(err)
}

// cancelled returns ctx's error, a per-call timeout error, or nil; see
// llm.Cancelled.
func (m *Model) cancelled(ctx, callCtx context.Context) error {
	return llm.Cancelled(ctx, callCtx, m.cfg.Timeout)
}

// transportError classifies a failure to get a response; see
// llm.TransportError.
func transportError(err error) *llm.Error { return llm.TransportError(err) }

// truncated is the error of a stream cut off before its end.
func truncated(err error) *llm.Error { return llm.Truncated("message_stop", err) }

// APIError is the error the API answered with: the cause (errors.As) of
// the *llm.Error of a failed call.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type and Message are the error object's, e.g. "overloaded_error";
	// Type is empty when the body had another shape.
	Type, Message string
	// RequestID is the request-id header, else the body's request_id.
	RequestID string
}

// Error returns the status, type and message.
func (e *APIError) Error() string {
	s := "anthropic: " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// httpError converts an error status (429, 529 overloaded and 5xx are
// transient; 400, 401, 403 permanent) and closes the body.
func httpError(raw *http.Response) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	msg, typ := parseError(body)
	apiErr := &APIError{StatusCode: raw.StatusCode, Type: typ, Message: msg, RequestID: raw.Header.Get("request-id")}
	if apiErr.RequestID == "" {
		var b struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(body, &b)
		apiErr.RequestID = b.RequestID
	}
	return llm.StatusError(raw.StatusCode, raw.Header, msg, apiErr)
}

// streamedError converts an error event, classified by its type as if it
// had come with the matching HTTP status; an unknown type is a server
// failure, transient.
func streamedError(data []byte) *llm.Error {
	msg, typ := parseError(data)
	status, ok := typeStatus[typ]
	if !ok {
		status = http.StatusInternalServerError
	}
	class, code := llm.ClassifyHTTP(status)
	if msg == "" {
		msg = "error event in stream"
	}
	return &llm.Error{Class: class, Code: code, Message: msg}
}

// parseError reads the message and type of an error body:
//
//	{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_…"}
//
// The message is the raw body, shortened, when the body has another shape.
func parseError(body []byte) (msg, typ string) {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && (e.Error.Message != "" || e.Error.Type != "") {
		return e.Error.Message, e.Error.Type
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s, ""
}
