package cli

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/stepwise-run/stepwise/internal/bench"
	"github.com/stepwise-run/stepwise/store"
)

// queryPaths are the reads bench queries times: the dashboard's lists and
// per-agent views, then the reads of opening the long session (long, or
// the session titled bench.LongSessionTitle; none when there is neither).
func queryPaths(ctx context.Context, st store.Store, agent, long string, now time.Time) ([][2]string, error) {
	page, err := st.SessionList(ctx, &store.SessionListParams{Agent: agent, Limit: 50})
	if err != nil {
		return nil, err
	}
	if len(page.Sessions) == 0 {
		return nil, fmt.Errorf("stepwise: bench queries: no session of agent %q (run bench fill first)", agent)
	}
	// The longest session of the first page: its middle 200 steps.
	sess := page.Sessions[0]
	for _, s := range page.Sessions {
		if s.LastSequence > sess.LastSequence && s.Title != bench.LongSessionTitle {
			sess = s
		}
	}
	mid := max(1, sess.LastSequence/2-100)
	a := url.QueryEscape(agent)
	from := now.Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	paths := [][2]string{
		{"sessions list (agent+status, 50)", "/v1/dashboard/sessions?agent=" + a + "&status=completed,failed&limit=50"},
		{"session open (summary)", "/v1/sessions/" + sess.ID + "/summary"},
		{"200 steps", fmt.Sprintf("/v1/sessions/%s/steps?start_seq=%d&end_seq=%d", sess.ID, mid, mid+199)},
		{"agent overview", "/v1/agents/" + url.PathEscape(agent) + "/overview"},
		{"agent workflow graph", "/v1/agents/" + url.PathEscape(agent) + "/graph"},
		{"metrics 30 days (daily)", "/v1/metrics?bucket=day&from=" + from},
		{"metrics 30 days (hourly, agent)", "/v1/metrics?bucket=hour&agent=" + a + "&from=" + from},
		{"search top-10", "/v1/search?q=refund+for+a+damaged+package&k=10"},
	}
	if long == "" {
		lp, err := st.SessionList(ctx, &store.SessionListParams{Query: bench.LongSessionTitle, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(lp.Sessions) == 0 {
			return paths, nil
		}
		long = lp.Sessions[0].ID
	}
	ls, err := st.SessionGet(ctx, &store.SessionGetParams{ID: long})
	if err != nil {
		return nil, fmt.Errorf("stepwise: bench queries: long session: %w", err)
	}
	n, base := ls.LastSequence, "/v1/sessions/"+ls.ID
	return append(paths,
		[2]string{fmt.Sprintf("long (%d steps): session", n), base},
		[2]string{"long: newest runs (dashboard)", base + "/runs?limit=100"},
		[2]string{"long: summary", base + "/summary"},
		[2]string{"long: first 200 steps", base + "/steps?start_seq=1&end_seq=200"},
		[2]string{"long: steps first page (limit)", base + "/steps?limit=100"},
		[2]string{"long: last 200 steps", fmt.Sprintf("%s/steps?start_seq=%d&end_seq=%d", base, max(1, n-199), n)},
		[2]string{"long: 200 steps in the middle", fmt.Sprintf("%s/steps?start_seq=%d&end_seq=%d", base, n/2, n/2+199)},
		[2]string{"long: last step", fmt.Sprintf("%s/steps/%d", base, n)},
	), nil
}
