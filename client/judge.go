package client

import (
	"context"
	"net/http"

	"github.com/stepwise-run/stepwise/wire"
)

// JudgeRun has the server's LLM judges of the run's agent grade the run now
// (POST /v1/runs/{id}/judge) and returns the evals.
func (c *Client) JudgeRun(ctx context.Context, runID string) ([]*wire.Eval, error) {
	return c.judge(ctx, "/v1/runs/"+seg(runID)+"/judge")
}

// JudgeSession judges every run of a session whose agent has judges (POST
// /v1/sessions/{id}/judge).
func (c *Client) JudgeSession(ctx context.Context, sessionID string) ([]*wire.Eval, error) {
	return c.judge(ctx, "/v1/sessions/"+seg(sessionID)+"/judge")
}

func (c *Client) judge(ctx context.Context, path string) ([]*wire.Eval, error) {
	var out wire.EvalList
	if _, err := c.do(ctx, http.MethodPost, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Evals, nil
}
