package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
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
	if raw != nil && raw.StatusCode >= 400 {
		return httpError(raw, err)
	}
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		return cerr
	}
	if err == nil {
		err = errors.New("no response")
	}
	return transportError(err)
}

// cancelled returns ctx's own error when the caller cancelled (unchanged, as
// the llm.Model contract says), a transient "timeout" error when only
// Config.Timeout expired, and nil when neither context is done.
func (m *Model) cancelled(ctx, callCtx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if callCtx.Err() != nil {
		return &llm.Error{
			Class:   steptype.ErrorTransient,
			Code:    "timeout",
			Message: fmt.Sprintf("no complete response within %v", m.cfg.Timeout),
			Err:     context.DeadlineExceeded,
		}
	}
	return nil
}

// transportError classifies a failure to get a response at all. Refused and
// reset connections, timeouts and a connection closed before the response
// (io.EOF) are transient; anything else (bad URL, TLS, DNS, no
// credentials) is permanent.
func transportError(err error) *llm.Error {
	class := llm.Classify(err)
	if errors.Is(err, io.EOF) {
		class = steptype.ErrorTransient
	}
	code := "connection"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = "timeout"
	case class == steptype.ErrorPermanent:
		code = "request"
	}
	return &llm.Error{Class: class, Code: code, Message: err.Error(), Err: err}
}

// truncated is the error of a stream that ended before message_stop:
// transient, since the next attempt is likely to complete.
func truncated(err error) *llm.Error {
	msg := "stream ended before message_stop"
	if err != nil {
		msg += ": " + err.Error()
	}
	return &llm.Error{Class: steptype.ErrorTransient, Code: "stream_truncated", Message: msg, Err: err}
}

// httpError converts an error status (429, 529 overloaded and 5xx are
// transient; 400, 401, 403 permanent). The SDK has already read the body
// and put it back in raw.Body.
func httpError(raw *http.Response, sdkErr error) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	class, code := llm.ClassifyHTTP(raw.StatusCode)
	msg, _ := parseError(body)
	if msg == "" {
		msg = http.StatusText(raw.StatusCode)
	}
	e := &llm.Error{
		Class:      class,
		StatusCode: raw.StatusCode,
		Code:       code,
		RetryAfter: llm.ParseRetryAfter(raw.Header, time.Now()),
		Message:    msg,
	}
	var apiErr *sdk.Error
	if errors.As(sdkErr, &apiErr) {
		e.Err = apiErr
	}
	return e
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
