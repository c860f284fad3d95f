package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// TransportError classifies a failure to get a response at all. Refused and
// reset connections, timeouts and a connection closed before the response
// (io.EOF) are transient; anything else (bad URL, TLS, DNS, no credentials)
// is permanent.
func TransportError(err error) *Error {
	class := Classify(err)
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
	return &Error{Class: class, Code: code, Message: err.Error(), Err: err}
}

// Truncated is the error of a stream that ended before its end marker
// (what names it): transient, since the next attempt is likely to complete.
func Truncated(what string, err error) *Error {
	msg := "stream ended before " + what
	if err != nil {
		msg += ": " + err.Error()
	}
	return &Error{Class: steptype.ErrorTransient, Code: "stream_truncated", Message: msg, Err: err}
}

// CallTimeout is the transient error of a call that exceeded a provider's
// per-call timeout.
func CallTimeout(limit time.Duration) *Error {
	return &Error{Class: steptype.ErrorTransient, Code: "timeout",
		Message: fmt.Sprintf("no complete response within %v", limit), Err: context.DeadlineExceeded}
}

// Cancelled returns ctx's own error when the caller cancelled (unchanged, as
// the Model contract says), CallTimeout when only callCtx (the provider's
// per-call timeout) expired, and nil when neither is done.
func Cancelled(ctx, callCtx context.Context, limit time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if callCtx.Err() != nil {
		return CallTimeout(limit)
	}
	return nil
}

// StatusError builds the error of an HTTP error response: class and code
// from ClassifyHTTP, the Retry-After hint from the headers, the provider's
// message (or the status text when it gave none).
func StatusError(status int, h http.Header, message string, cause error) *Error {
	class, code := ClassifyHTTP(status)
	if message == "" {
		message = http.StatusText(status)
	}
	return &Error{Class: class, StatusCode: status, Code: code, RetryAfter: ParseRetryAfter(h, time.Now()), Message: message, Err: cause}
}
