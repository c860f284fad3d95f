package llm

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter returns the delay a server asked for in h, for providers
// filling [Error.RetryAfter]. It reads, in order:
//
//   - retry-after-ms: milliseconds, possibly fractional (OpenAI, Azure);
//   - Retry-After: whole or fractional seconds, or an HTTP date, which is
//     measured from now.
//
// It returns 0 when neither header is present or parseable, and for values
// that are not positive or already past; it caps hints at 24 hours.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return clampRetryAfter(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return clampRetryAfter(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// maxRetryAfter bounds parsed hints so that absurd values cannot overflow a
// Duration; the engine applies its own, lower, ceiling.
const maxRetryAfter = 24 * time.Hour

func clampRetryAfter(ns float64) time.Duration {
	if ns >= float64(maxRetryAfter) {
		return maxRetryAfter
	}
	return time.Duration(ns)
}
