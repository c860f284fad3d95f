package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/stepwise-run/stepwise/store"
)

var _ store.MetricsStore = (*Store)(nil)

// metricsStepsSQL aggregates the steps of a range (the partial minutes at
// the edges of a query; index steps_created, migration 00030), first per
// run so that the joins to runs (agent) and sessions (split key) happen
// once per run and bucket, not once per step. Placeholders: ?1 start of
// the first bucket, ?2 bucket width, ?3 from, ?4 to (nanoseconds), ?5 agent
// or "", ?6 the JSON path of the split key or "".
const metricsStepsSQL = `WITH s AS (
	SELECT (created_at - ?1) / ?2 AS b, session_id, run_id, count(*) AS n,
		sum(kind = 'error' OR status = 'failed') AS e,
		sum(coalesce(m ->> '$.input_tokens', 0)) AS it, sum(coalesce(m ->> '$.output_tokens', 0)) AS ot,
		sum(coalesce(m ->> '$.cost', 0.0)) AS c
	FROM (SELECT created_at, session_id, run_id, kind, status, CAST(body AS TEXT) -> '$.metrics' AS m
		FROM steps INDEXED BY steps_created WHERE created_at >= ?3 AND created_at < ?4)
	GROUP BY b, session_id, run_id)
SELECT s.b, KEY, sum(s.n), sum(s.e), sum(s.it), sum(s.ot), sum(s.c)
FROM s JOIN sessions ses ON ses.id = s.session_id
LEFT JOIN runs r ON r.id = s.run_id
WHERE ?5 = '' OR coalesce(r.agent, ses.agent) = ?5
GROUP BY 1, 2`

// metricsRollupsSQL aggregates the per-minute rollups of whole minutes
// (table step_rollups, maintained by triggers); same placeholders, ?3 and ?4
// on minute boundaries.
const metricsRollupsSQL = `SELECT (ro.minute - ?1) / ?2, KEY, sum(ro.steps), sum(ro.errors),
	sum(ro.input_tokens), sum(ro.output_tokens), sum(ro.cost)
FROM step_rollups ro JOIN sessions ses ON ses.id = ro.session_id
LEFT JOIN runs r ON r.id = ro.run_id
WHERE ro.minute >= ?3 AND ro.minute < ?4 AND (?5 = '' OR coalesce(r.agent, ses.agent) = ?5)
GROUP BY 1, 2`

// metricsRunsSQL lists the runs finished in the range (index runs_finished);
// the percentiles are computed by the builder.
const metricsRunsSQL = `SELECT (r.finished_at - ?1) / ?2, KEY, r.status = 'failed',
	(r.finished_at - r.created_at)
FROM runs r JOIN sessions ses ON ses.id = r.session_id
WHERE r.finished_at >= ?3 AND r.finished_at < ?4 AND r.finished_at > 0 AND (?5 = '' OR r.agent = ?5)`

// metricsEvalsSQL sums eval scores per bucket (index evals_created).
const metricsEvalsSQL = `SELECT (e.created_at - ?1) / ?2 AS b, KEY, sum(e.score), count(*)
FROM evals e JOIN sessions ses ON ses.id = e.session_id
LEFT JOIN runs r ON r.id = e.run_id AND e.run_id <> ''
WHERE e.created_at >= ?3 AND e.created_at < ?4 AND (?5 = '' OR coalesce(r.agent, ses.agent) = ?5)
GROUP BY 1, 2`

// Metrics implements store.MetricsStore with three aggregate queries on the
// reader pool.
func (s *Store) Metrics(ctx context.Context, p *store.MetricsParams) (*store.Metrics, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	b := store.NewMetricsBuilder(p)
	// ?6 is always bound (the driver wants every argument used); without
	// a split it is "" and every key is "".
	key := `CASE WHEN ?6 = '' THEN '' ELSE coalesce(CAST(ses.metadata AS TEXT) -> ?6, '') END`
	path := ""
	if p.Split != "" {
		path = `$."` + p.Split + `"`
	}
	args := func(from, to int64) []any {
		return []any{nanos(p.Start()), int64(p.Bucket.Duration()), from, to, p.Agent, path}
	}
	q := func(sqlText string, args []any, row func(*sql.Rows) error) error {
		rows, err := s.rdb.QueryContext(ctx, strings.Replace(sqlText, "KEY", key, 1), args...)
		if err != nil {
			return mapErr(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := row(rows); err != nil {
				return mapErr(err)
			}
		}
		return mapErr(rows.Err())
	}
	var (
		i                  int
		k                  string
		n, e, it, ot, runs int64
		c                  float64
		failed             bool
	)
	addSteps := func(r *sql.Rows) error {
		if err := r.Scan(&i, &k, &n, &e, &it, &ot, &c); err != nil {
			return err
		}
		b.AddSteps(i, k, n, e, it, ot, c)
		return nil
	}
	for _, part := range store.MetricsParts(p) {
		text := metricsStepsSQL
		if part.Rollup {
			text = metricsRollupsSQL
		}
		if err := q(text, args(part.From, part.To), addSteps); err != nil {
			return nil, err
		}
	}
	all := args(nanos(p.From), nanos(p.To))
	if err := q(metricsRunsSQL, all, func(r *sql.Rows) error {
		var ns int64
		if err := r.Scan(&i, &k, &failed, &ns); err != nil {
			return err
		}
		runs = 0
		if failed {
			runs = 1
		}
		b.AddRuns(i, k, 1, runs)
		b.AddLatency(i, k, float64(ns)/1e6)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := q(metricsEvalsSQL, all, func(r *sql.Rows) error {
		if err := r.Scan(&i, &k, &c, &n); err != nil {
			return err
		}
		b.AddEvals(i, k, c, n)
		return nil
	}); err != nil {
		return nil, err
	}
	return b.Result(), nil
}
