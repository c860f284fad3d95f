package client

import (
	"context"
	"net/http"

	"github.com/stepwise-run/stepwise/steptype"
)

// SessionRuns returns the runs of a session, newest first, sub-agent runs
// included (GET /v1/sessions/{id}/runs).
func (c *Client) SessionRuns(ctx context.Context, sessionID string) ([]*steptype.Run, error) {
	var out struct {
		Runs []*steptype.Run `json:"runs"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(sessionID)+"/runs", nil, nil, &out)
	return out.Runs, err
}
