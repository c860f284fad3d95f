package sqlite

import (
	"context"
	"database/sql"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// SessionStats implements store.SessionStatsReader from the rows the
// triggers of migration 00065 keep.
func (s *Store) SessionStats(ctx context.Context, p *store.SessionStatsParams) (*store.SessionStats, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("session stats need a session id")
	}
	out := &store.SessionStats{Steps: []store.StepStat{}, Runs: map[steptype.RunStatus]int{}}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, p.ID).Scan(&one); err != nil {
			if err == sql.ErrNoRows {
				return rules.NotFound("session", p.ID)
			}
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT kind, role, steps, input_tokens, output_tokens, cached_tokens, cost
			FROM session_step_stats WHERE session_id = ? AND steps > 0`, p.ID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st store.StepStat
			var kind, role string
			if err := rows.Scan(&kind, &role, &st.Steps, &st.InputTokens, &st.OutputTokens, &st.CachedTokens, &st.Cost); err != nil {
				return err
			}
			st.Kind, st.Role = steptype.Kind(kind), steptype.Role(role)
			out.Steps = append(out.Steps, st)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		runs, err := tx.QueryContext(ctx, `SELECT status, runs FROM session_run_stats WHERE session_id = ? AND runs > 0`, p.ID)
		if err != nil {
			return err
		}
		defer runs.Close()
		for runs.Next() {
			var status string
			var n int
			if err := runs.Scan(&status, &n); err != nil {
				return err
			}
			out.Runs[steptype.RunStatus(status)] = n
		}
		return runs.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
