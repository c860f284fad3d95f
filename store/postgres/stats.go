package postgres

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// SessionStats implements store.SessionStatsReader from the rows the
// triggers of migrations 00065 and 00100 keep.
func (s *Store) SessionStats(ctx context.Context, p *store.SessionStatsParams) (*store.SessionStats, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("session stats need a session id")
	}
	rows, err := s.pool.Query(ctx, sessionStatsSQL, p.ID)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := &store.SessionStats{Steps: []store.StepStat{}, Runs: map[steptype.RunStatus]int{}}
	found := false
	for rows.Next() {
		var what, kind, role string
		var st store.StepStat
		if err := rows.Scan(&what, &kind, &role, &st.Steps, &st.InputTokens, &st.OutputTokens, &st.CachedTokens, &st.Cost); err != nil {
			return nil, mapErr(err)
		}
		switch what {
		case "session":
			found = true
		case "steps":
			st.Kind, st.Role = steptype.Kind(kind), steptype.Role(role)
			out.Steps = append(out.Steps, st)
		case "runs":
			out.Runs[steptype.RunStatus(kind)] = int(st.Steps)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	if !found {
		return nil, rules.NotFound("session", p.ID)
	}
	return out, nil
}

// sessionStatsSQL reads a session's totals in one round trip: its row (to
// tell an unknown session), its step totals and its run counts. The step
// totals are the folded ones (session_step_stats: the steps up to the
// session's stats_through, migration 00100) plus the steps above that
// watermark, fewer than 256, read through the (session_id, sequence)
// index; one statement, so one snapshot of both.
const sessionStatsSQL = `SELECT 'session', '', '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::float8 FROM sessions WHERE id = $1
UNION ALL
SELECT 'steps', kind, role, sum(steps)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cached_tokens)::bigint, sum(cost)::float8
FROM (SELECT kind, role, steps, input_tokens, output_tokens, cached_tokens, cost FROM session_step_stats WHERE session_id = $1
	UNION ALL
	SELECT kind, COALESCE(role, ''), 1, COALESCE(input_tokens, 0), COALESCE(output_tokens, 0), COALESCE(cached_tokens, 0), COALESCE(cost, 0)
	FROM steps WHERE session_id = $1 AND sequence > (SELECT stats_through FROM sessions WHERE id = $1)) t
GROUP BY kind, role
HAVING sum(steps) > 0
UNION ALL
SELECT 'runs', status, '', runs, 0, 0, 0, 0 FROM session_run_stats WHERE session_id = $1 AND runs > 0`
