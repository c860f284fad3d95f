package sqlite

import (
	"context"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// runLatestSQL ranks each session's top-level runs newest first (the
// runs_session index order) and keeps the first with the count.
const runLatestSQL = `SELECT session_id, id, status, n FROM (
	SELECT session_id, id, status,
		count(*) OVER (PARTITION BY session_id) AS n,
		row_number() OVER (PARTITION BY session_id ORDER BY created_at DESC, id DESC) AS rn
	FROM runs WHERE hop = 0 AND session_id IN (%s)
) AS ranked WHERE rn = 1`

// RunLatest implements store.LatestRunReader in one query.
func (s *Store) RunLatest(ctx context.Context, p *store.RunLatestParams) (map[string]store.LatestRun, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckRunLatest(p); err != nil {
		return nil, err
	}
	out := map[string]store.LatestRun{}
	if len(p.SessionIDs) == 0 {
		return out, nil
	}
	args := make([]any, len(p.SessionIDs))
	for i, id := range p.SessionIDs {
		args[i] = id
	}
	q := strings.Replace(runLatestSQL, "%s", strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", "), 1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sid, id, status string
		var n int
		if err := rows.Scan(&sid, &id, &status, &n); err != nil {
			return nil, mapErr(err)
		}
		out[sid] = store.LatestRun{RunID: id, Status: steptype.RunStatus(status), Runs: n}
	}
	return out, mapErr(rows.Err())
}
