package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

var _ store.SessionStatsReader = (*Store)(nil)

// SessionStats implements store.SessionStatsReader from the rows the
// triggers of migration 00065 keep.
func (s *Store) SessionStats(ctx context.Context, p *store.SessionStatsParams) (*store.SessionStats, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("session stats need a session id")
	}
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, p.ID).Scan(&one); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, rules.NotFound("session", p.ID)
		}
		return nil, mapErr(err)
	}
	out := &store.SessionStats{Steps: []store.StepStat{}, Runs: map[steptype.RunStatus]int{}}
	rows, err := s.pool.Query(ctx, `SELECT kind, role, steps, input_tokens, output_tokens, cached_tokens, cost
		FROM session_step_stats WHERE session_id = $1 AND steps > 0`, p.ID)
	if err != nil {
		return nil, mapErr(err)
	}
	for rows.Next() {
		var st store.StepStat
		var kind, role string
		if err := rows.Scan(&kind, &role, &st.Steps, &st.InputTokens, &st.OutputTokens, &st.CachedTokens, &st.Cost); err != nil {
			rows.Close()
			return nil, mapErr(err)
		}
		st.Kind, st.Role = steptype.Kind(kind), steptype.Role(role)
		out.Steps = append(out.Steps, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	runs, err := s.pool.Query(ctx, `SELECT status, runs FROM session_run_stats WHERE session_id = $1 AND runs > 0`, p.ID)
	if err != nil {
		return nil, mapErr(err)
	}
	defer runs.Close()
	for runs.Next() {
		var status string
		var n int
		if err := runs.Scan(&status, &n); err != nil {
			return nil, mapErr(err)
		}
		out.Runs[steptype.RunStatus(status)] = n
	}
	return out, mapErr(runs.Err())
}
