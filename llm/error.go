package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Error is a classified provider error. Providers return it (wrapped or not)
// so the engine can decide whether to retry.
type Error struct {
	Class      steptype.ErrorClass
	StatusCode int           // HTTP status, 0 if none
	Code       string        // short machine code: "rate_limited", "server_error", "bad_request", "auth", "timeout", "stream_truncated", "bad_chunk"
	RetryAfter time.Duration // from a Retry-After header, 0 if none
	Message    string        // the provider's message
	Err        error         // the underlying cause
}

// Error formats the error with its code, status and message.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.StatusCode != 0 {
		return fmt.Sprintf("llm: %s (HTTP %d): %s", e.Code, e.StatusCode, msg)
	}
	return fmt.Sprintf("llm: %s: %s", e.Code, msg)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorClass reports whether retrying can help.
func (e *Error) ErrorClass() steptype.ErrorClass { return e.Class }

// RetryAfterHint returns the server's Retry-After, 0 if none.
func (e *Error) RetryAfterHint() time.Duration { return e.RetryAfter }

// ClassifyHTTP classifies an HTTP status code: 408, 409, 425, 429 and 5xx
// are transient, every other 4xx is permanent.
func ClassifyHTTP(status int) (steptype.ErrorClass, string) {
	switch {
	case status == 429:
		return steptype.ErrorTransient, "rate_limited"
	case status == 408 || status == 409 || status == 425:
		return steptype.ErrorTransient, "retryable_status"
	case status >= 500:
		return steptype.ErrorTransient, "server_error"
	case status == 401 || status == 403:
		return steptype.ErrorPermanent, "auth"
	case status == 404:
		return steptype.ErrorPermanent, "not_found"
	default:
		return steptype.ErrorPermanent, "bad_request"
	}
}

// Classify returns the class of any error: an explicit class when err (or
// something it wraps) has an ErrorClass method; transient for timeouts,
// connection resets, refused connections, unexpected EOF and DNS failures;
// permanent
// otherwise. Cancellation of ctx by the caller is permanent (nothing to retry).
func Classify(err error) steptype.ErrorClass {
	if err == nil {
		return ""
	}
	var c interface{ ErrorClass() steptype.ErrorClass }
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	if errors.Is(err, context.Canceled) {
		return steptype.ErrorPermanent
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return steptype.ErrorTransient
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return steptype.ErrorTransient
	}
	// A name that does not resolve now may resolve in a moment (a resolver
	// restarting, a network coming up); retries are bounded anyway.
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return steptype.ErrorTransient
	}
	return steptype.ErrorPermanent
}

// RetryAfter returns the Retry-After hint carried by err, 0 if none.
func RetryAfter(err error) time.Duration {
	var h interface{ RetryAfterHint() time.Duration }
	if errors.As(err, &h) {
		return h.RetryAfterHint()
	}
	return 0
}
