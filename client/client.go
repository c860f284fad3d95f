package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to a Stepwise server. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	hc    *http.Client
	token string
	// retry is the delay schedule of stream reconnections.
	retryMin, retryMax time.Duration
	maxFailures        int
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a default client. Its Timeout must be
// zero (or long), since streams and long-polls stay open.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithReconnect sets how streams reconnect: the first delay, the maximum
// delay (doubling in between), and how many consecutive failed attempts end
// the stream with an error. Defaults: 100ms, 5s, 10.
func WithReconnect(first, max time.Duration, failures int) Option {
	return func(c *Client) { c.retryMin, c.retryMax, c.maxFailures = first, max, failures }
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:7700"; a path prefix is kept).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("stepwise client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, hc: &http.Client{}, retryMin: 100 * time.Millisecond, retryMax: 5 * time.Second, maxFailures: 10}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	return c, nil
}

// url builds the URL of an API path whose segments are already escaped.
func (c *Client) url(path string, q url.Values) string {
	u := c.base.String() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func seg(s string) string { return url.PathEscape(s) }

func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("stepwise client: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), rd)
	if err != nil {
		return nil, fmt.Errorf("stepwise client: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// maxResponse bounds a JSON response body.
const maxResponse = 256 << 20

// do sends a request and decodes a 2xx JSON response into out (when not
// nil). It returns the status.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) (int, error) {
	req, err := c.newRequest(ctx, method, path, q, body)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("stepwise client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("stepwise client: %s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp.StatusCode, data)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("stepwise client: %s %s: decode response: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// isPermanent reports whether a failed stream connection should not be
// retried: the server refused the request itself.
func isPermanent(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
	}
	return false
}
