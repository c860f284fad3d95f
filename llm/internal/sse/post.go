package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// DefaultClient sends the requests of a provider configured without an
// HTTP client: the standard transport, with a 10-minute limit on the wait
// for response headers so that a server that never answers cannot hold a
// call forever. The body of a stream has no time limit.
var DefaultClient = &http.Client{Transport: defaultTransport()}

func defaultTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = 10 * time.Minute
	return t
}

// Post sends body as JSON to url with the headers h and asks for an event
// stream. The response is returned whatever its status; its body is the
// caller's to close. An error means there is no response.
func Post(ctx context.Context, c *http.Client, url string, body any, h http.Header) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return c.Do(req)
}
