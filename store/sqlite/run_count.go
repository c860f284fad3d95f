package sqlite

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// RunCount implements store.RunCounter from the counters the triggers of
// migration 00066 keep (agent_run_stats).
func (s *Store) RunCount(ctx context.Context, p *store.RunCountParams) (map[steptype.RunStatus]int, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckRunCount(p); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT status, runs FROM agent_run_stats WHERE agent = ? AND runs > 0`, p.Agent)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := map[steptype.RunStatus]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, mapErr(err)
		}
		out[steptype.RunStatus(st)] = n
	}
	return out, mapErr(rows.Err())
}
