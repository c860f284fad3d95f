package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
)

var _ store.MetricsStore = (*Store)(nil)

// metricsKey is the split value of a session as JSON text ($6 is the key,
// "" without a split).
const metricsKey = `CASE WHEN $6::text = '' THEN '' ELSE COALESCE((convert_from(ses.metadata, 'UTF8')::json -> $6::text)::text, '') END`

// metricsStepsSQL aggregates the steps of a range (the partial minutes at
// the edges of a query; index steps_created, migration 00030), first per
// run so that the joins to runs (agent) and sessions (split key) happen once
// per run and bucket. $1 start of the first bucket, $2 bucket width, $3
// from, $4 to (nanoseconds), $5 agent or "", $6 split key or "".
const metricsStepsSQL = `WITH s AS (
	SELECT (created_at - $1::bigint) / $2::bigint AS b, session_id, run_id, count(*) AS n,
		count(*) FILTER (WHERE kind = 'error' OR status = 'failed') AS e,
		sum(COALESCE((m ->> 'input_tokens')::bigint, 0)) AS it, sum(COALESCE((m ->> 'output_tokens')::bigint, 0)) AS ot,
		sum(COALESCE((m ->> 'cost')::float8, 0)) AS c
	FROM (SELECT created_at, session_id, run_id, kind, status, convert_from(body, 'UTF8')::json -> 'metrics' AS m
		FROM steps WHERE created_at >= $3::bigint AND created_at < $4::bigint) st
	GROUP BY 1, 2, 3)
SELECT s.b::int, KEY, sum(s.n)::bigint, sum(s.e)::bigint, sum(s.it)::bigint, sum(s.ot)::bigint, sum(s.c)::float8
FROM s JOIN sessions ses ON ses.id = s.session_id
LEFT JOIN runs r ON r.id = s.run_id
WHERE $5::text = '' OR COALESCE(r.agent, ses.agent) = $5::text
GROUP BY 1, 2`

// metricsRollupsSQL aggregates the per-minute rollups of whole minutes
// (table step_rollups, maintained by triggers); same placeholders, $3 and $4
// on minute boundaries.
const metricsRollupsSQL = `SELECT ((ro.minute - $1::bigint) / $2::bigint)::int, KEY, sum(ro.steps)::bigint, sum(ro.errors)::bigint,
	sum(ro.input_tokens)::bigint, sum(ro.output_tokens)::bigint, sum(ro.cost)::float8
FROM step_rollups ro JOIN sessions ses ON ses.id = ro.session_id
LEFT JOIN runs r ON r.id = ro.run_id
WHERE ro.minute >= $3::bigint AND ro.minute < $4::bigint AND ($5::text = '' OR COALESCE(r.agent, ses.agent) = $5::text)
GROUP BY 1, 2`

// metricsRunsSQL aggregates the runs finished in the range, percentiles
// included (index runs_finished).
const metricsRunsSQL = `SELECT ((r.finished_at - $1::bigint) / $2::bigint)::int AS b, KEY, count(*),
	count(*) FILTER (WHERE r.status = 'failed'),
	percentile_cont(0.5) WITHIN GROUP (ORDER BY (r.finished_at - r.created_at) / 1e6::float8),
	percentile_cont(0.95) WITHIN GROUP (ORDER BY (r.finished_at - r.created_at) / 1e6::float8),
	percentile_cont(0.99) WITHIN GROUP (ORDER BY (r.finished_at - r.created_at) / 1e6::float8)
FROM runs r JOIN sessions ses ON ses.id = r.session_id
WHERE r.finished_at >= $3::bigint AND r.finished_at < $4::bigint AND r.finished_at > 0 AND ($5::text = '' OR r.agent = $5::text)
GROUP BY 1, 2`

// metricsEvalsSQL sums eval scores per bucket (index evals_created).
const metricsEvalsSQL = `SELECT ((e.created_at - $1::bigint) / $2::bigint)::int AS b, KEY, sum(e.score)::float8, count(*)
FROM evals e JOIN sessions ses ON ses.id = e.session_id
LEFT JOIN runs r ON r.id = e.run_id AND e.run_id <> ''
WHERE e.created_at >= $3::bigint AND e.created_at < $4::bigint AND ($5::text = '' OR COALESCE(r.agent, ses.agent) = $5::text)
GROUP BY 1, 2`

// Metrics implements store.MetricsStore: every aggregate, percentiles
// included, is computed by PostgreSQL; evals are read when the schema has
// the observation tables.
func (s *Store) Metrics(ctx context.Context, p *store.MetricsParams) (*store.Metrics, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	b := store.NewMetricsBuilder(p)
	args := func(from, to int64) []any {
		return []any{nanos(p.Start()), int64(p.Bucket.Duration()), from, to, p.Agent, p.Split}
	}
	q := func(sqlText string, args []any, row func(pgx.Rows) error) error {
		rows, err := s.pool.Query(ctx, strings.Replace(sqlText, "KEY", metricsKey, 1), args...)
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
		i                int
		k                string
		n, e, it, ot     int64
		c, p50, p95, p99 float64
	)
	addSteps := func(r pgx.Rows) error {
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
	if err := q(metricsRunsSQL, all, func(r pgx.Rows) error {
		if err := r.Scan(&i, &k, &n, &e, &p50, &p95, &p99); err != nil {
			return err
		}
		b.AddRuns(i, k, n, e)
		b.SetLatency(i, k, p50, p95, p99)
		return nil
	}); err != nil {
		return nil, err
	}
	var hasEvals bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('evals') IS NOT NULL`).Scan(&hasEvals); err != nil {
		return nil, mapErr(err)
	}
	if hasEvals {
		if err := q(metricsEvalsSQL, all, func(r pgx.Rows) error {
			if err := r.Scan(&i, &k, &c, &n); err != nil {
				return err
			}
			b.AddEvals(i, k, c, n)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return b.Result(), nil
}
