package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/stepwise-run/stepwise/wire"
)

// Metrics returns the time series of GET /v1/metrics. Zero fields of p are
// left to the server's defaults (all agents, the last 24 hours, hour
// buckets, no split).
func (c *Client) Metrics(ctx context.Context, p wire.MetricsParams) (*wire.Metrics, error) {
	q := url.Values{}
	for k, v := range map[string]string{"agent": p.Agent, "bucket": string(p.Bucket), "split": p.Split} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !p.From.IsZero() {
		q.Set("from", p.From.UTC().Format(time.RFC3339Nano))
	}
	if !p.To.IsZero() {
		q.Set("to", p.To.UTC().Format(time.RFC3339Nano))
	}
	var out wire.Metrics
	if _, err := c.do(ctx, http.MethodGet, "/v1/metrics", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
