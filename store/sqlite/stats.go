package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// SessionStats implements store.SessionStatsReader from the folded rows of
// session_step_stats (migrations 00065, 00200) and the steps of the tail,
// read in one transaction.
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
		upto, err := readUpto(ctx, tx)
		if err != nil {
			return err
		}
		if out.Steps, err = sessionStepStats(ctx, tx, p.ID, upto); err != nil {
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

// sessionStatsSQL reads the folded statistics of session ?1 and the
// aggregate of its steps in the tail (rowid above ?2), in the table's key
// order.
const sessionStatsSQL = `SELECT kind, role, steps, input_tokens, output_tokens, cached_tokens, cost
FROM session_step_stats WHERE session_id = ?1 AND steps > 0
UNION ALL
SELECT kind, role, count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), sum(cost)
FROM steps WHERE rowid > ?2 AND session_id = ?1 GROUP BY kind, role`

// sessionStepStats merges the folded rows and the tail's of a session,
// sorted by kind and role.
func sessionStepStats(ctx context.Context, tx *sql.Tx, id string, upto int64) ([]store.StepStat, error) {
	rows, err := tx.QueryContext(ctx, sessionStatsSQL, id, upto)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.StepStat{}
	unsorted := false
	for rows.Next() {
		var st store.StepStat
		var kind, role string
		if err := rows.Scan(&kind, &role, &st.Steps, &st.InputTokens, &st.OutputTokens, &st.CachedTokens, &st.Cost); err != nil {
			return nil, err
		}
		st.Kind, st.Role = steptype.Kind(kind), steptype.Role(role)
		i := slices.IndexFunc(out, func(o store.StepStat) bool { return o.Kind == st.Kind && o.Role == st.Role })
		if i < 0 {
			unsorted = unsorted || len(out) > 0
			out = append(out, st)
			continue
		}
		o := &out[i]
		o.Steps += st.Steps
		o.InputTokens += st.InputTokens
		o.OutputTokens += st.OutputTokens
		o.CachedTokens += st.CachedTokens
		o.Cost += st.Cost
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if unsorted {
		slices.SortFunc(out, func(a, b store.StepStat) int {
			return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Role, b.Role))
		})
	}
	return out, nil
}
