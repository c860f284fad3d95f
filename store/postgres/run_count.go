package postgres

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// RunCount implements store.RunCounter with one aggregate over the
// runs_agent_status index.
func (s *Store) RunCount(ctx context.Context, p *store.RunCountParams) (map[steptype.RunStatus]int, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckRunCount(p); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM runs WHERE agent = $1 GROUP BY status`, p.Agent)
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
