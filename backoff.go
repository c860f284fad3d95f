package stepwise

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// backoffDelay is the wait before attempt+1: exponential with jitter
// (randomization factor 0.5) under the policy, and never shorter than the
// server's Retry-After hint.
func backoffDelay(p RetryPolicy, attempt int, retryAfter time.Duration) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.InitialInterval,
		RandomizationFactor: 0.5,
		Multiplier:          p.Multiplier,
		MaxInterval:         p.MaxInterval,
	}
	b.Reset()
	var d time.Duration
	for i := 0; i < attempt; i++ {
		d = b.NextBackOff()
	}
	if retryAfter > d {
		d = retryAfter
	}
	return d
}
