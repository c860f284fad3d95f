package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rollup"
)

// The aggregate queries below join a row to its session only for a
// metadata split (SPLITJOIN), and look its agent up only for an agent
// filter (AGENT): without either, they read their index alone. KEY is the
// split value of a row ($6 itself, "", without a split).

// metricsKey is the split value of a session as JSON text ($6 is the key).
const metricsKey = `COALESCE((convert_from(ses.metadata, 'UTF8')::json -> $6::text)::text, '')`

// metricsAgentSQL is the agent filter of a row s with a session_id and a
// run_id: the run's agent, or the session's for a row outside a run.
const metricsAgentSQL = `COALESCE((SELECT r.agent FROM runs r WHERE r.id = s.run_id AND s.run_id <> ''),
	(SELECT ses2.agent FROM sessions ses2 WHERE ses2.id = s.session_id)) = $5::text`

// metricsStepsSQL aggregates the steps of a range (the partial minutes at
// the edges of a query; index steps_created, migration 00030), first per
// run so that the lookups of the agent and the split key happen once per
// run and bucket. $1 start of the first bucket, $2 bucket width, $3 from,
// $4 to (nanoseconds), $5 agent or "", $6 split key or "".
const metricsStepsSQL = `WITH s AS (
	SELECT (created_at - $1::bigint) / $2::bigint AS b, session_id, run_id, count(*) AS n,
		count(*) FILTER (WHERE kind = 'error' OR status = 'failed') AS e,
		sum(COALESCE((m ->> 'input_tokens')::bigint, 0)) AS it, sum(COALESCE((m ->> 'output_tokens')::bigint, 0)) AS ot,
		sum(COALESCE((m ->> 'cost')::float8, 0)) AS c
	FROM (SELECT created_at, session_id, run_id, kind, status, convert_from(body, 'UTF8')::json -> 'metrics' AS m
		FROM steps WHERE created_at >= $3::bigint AND created_at < $4::bigint) st
	GROUP BY 1, 2, 3)
SELECT s.b::int, KEY, sum(s.n)::bigint, sum(s.e)::bigint, sum(s.it)::bigint, sum(s.ot)::bigint, sum(s.c)::float8
FROM s SPLITJOIN
WHERE AGENT
GROUP BY 1, 2`

// metricsRollupsSQL aggregates the per-minute rollups of whole minutes
// (view step_rollups_all: the rows of step_rollups and the deltas not yet
// folded into them, migration 00101); same placeholders, $3 and $4
// on minute boundaries.
const metricsRollupsSQL = `SELECT ((s.minute - $1::bigint) / $2::bigint)::int, KEY, sum(s.steps)::bigint, sum(s.errors)::bigint,
	sum(s.input_tokens)::bigint, sum(s.output_tokens)::bigint, sum(s.cost)::float8
FROM step_rollups_all s SPLITJOIN
WHERE s.minute >= $3::bigint AND s.minute < $4::bigint AND AGENT
GROUP BY 1, 2`

// metricsRunsSQL aggregates the runs finished in the range, percentiles
// included (index runs_finished).
const metricsRunsSQL = `SELECT ((s.finished_at - $1::bigint) / $2::bigint)::int AS b, KEY, count(*),
	count(*) FILTER (WHERE s.status = 'failed'),
	percentile_cont(0.5) WITHIN GROUP (ORDER BY (s.finished_at - s.created_at) / 1e6::float8),
	percentile_cont(0.95) WITHIN GROUP (ORDER BY (s.finished_at - s.created_at) / 1e6::float8),
	percentile_cont(0.99) WITHIN GROUP (ORDER BY (s.finished_at - s.created_at) / 1e6::float8)
FROM runs s SPLITJOIN
WHERE s.finished_at >= $3::bigint AND s.finished_at < $4::bigint AND s.finished_at > 0 AND ($5::text = '' OR s.agent = $5::text)
GROUP BY 1, 2`

// metricsRunListSQL lists the runs finished in a range, for a query that
// also reads the hour table: their durations are merged with the hours'
// by the builder, which computes the percentiles as percentile_cont does.
const metricsRunListSQL = `SELECT ((s.finished_at - $1::bigint) / $2::bigint)::int, KEY, s.status = 'failed',
	(s.finished_at - s.created_at)
FROM runs s SPLITJOIN
WHERE s.finished_at >= $3::bigint AND s.finished_at < $4::bigint AND s.finished_at > 0 AND ($5::text = '' OR s.agent = $5::text)`

// metricsEvalsSQL sums eval scores per bucket (index evals_created).
const metricsEvalsSQL = `SELECT ((s.created_at - $1::bigint) / $2::bigint)::int AS b, KEY, sum(s.score)::float8, count(*)
FROM evals s SPLITJOIN
WHERE s.created_at >= $3::bigint AND s.created_at < $4::bigint AND AGENT
GROUP BY 1, 2`

// metricsSQL returns text with its SPLITJOIN, KEY and AGENT parts for p.
func metricsSQL(text string, p *store.MetricsParams) string {
	join, key, agent := "", "$6::text", "$5::text = ''"
	if p.Split != "" {
		join, key = "JOIN sessions ses ON ses.id = s.session_id", metricsKey
	}
	if p.Agent != "" {
		agent = metricsAgentSQL
	}
	return strings.NewReplacer("SPLITJOIN", join, "KEY", key, "AGENT", agent).Replace(text)
}

// Metrics implements store.MetricsStore: the complete past hours of a
// query without a split from the hour table (metricsHours, migration
// 00080); the rest aggregated by PostgreSQL, percentiles included when no
// hour is read from the table (else the builder merges the durations);
// evals are read when the schema has the observation tables.
func (s *Store) Metrics(ctx context.Context, p *store.MetricsParams) (*store.Metrics, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	b := rollup.NewBuilder(p)
	gaps, err := s.metricsHours(ctx, p, b)
	if err != nil {
		return nil, err
	}
	hours := len(gaps) != 1 || gaps[0] != [2]int64{nanos(p.From), nanos(p.To)}
	args := func(from, to int64) []any {
		return []any{nanos(p.Start()), int64(p.Bucket.Duration()), from, to, p.Agent, p.Split}
	}
	q := func(sqlText string, args []any, row func(pgx.Rows) error) error {
		rows, err := s.pool.Query(ctx, metricsSQL(sqlText, p), args...)
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
		failed           bool
	)
	addSteps := func(r pgx.Rows) error {
		if err := r.Scan(&i, &k, &n, &e, &it, &ot, &c); err != nil {
			return err
		}
		b.AddSteps(i, k, n, e, it, ot, c)
		return nil
	}
	for _, gap := range gaps {
		for _, part := range rollup.PartsOf(gap[0], gap[1]) {
			text := metricsStepsSQL
			if part.Rollup {
				text = metricsRollupsSQL
			}
			if err := q(text, args(part.From, part.To), addSteps); err != nil {
				return nil, err
			}
		}
		if !hours {
			if err := q(metricsRunsSQL, args(gap[0], gap[1]), func(r pgx.Rows) error {
				if err := r.Scan(&i, &k, &n, &e, &p50, &p95, &p99); err != nil {
					return err
				}
				b.AddRuns(i, k, n, e)
				b.SetLatency(i, k, p50, p95, p99)
				return nil
			}); err != nil {
				return nil, err
			}
			continue
		}
		if err := q(metricsRunListSQL, args(gap[0], gap[1]), func(r pgx.Rows) error {
			if err := r.Scan(&i, &k, &failed, &n); err != nil {
				return err
			}
			var f int64
			if failed {
				f = 1
			}
			b.AddRuns(i, k, 1, f)
			b.AddLatency(i, k, float64(n)/1e6)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	var hasEvals bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('evals') IS NOT NULL`).Scan(&hasEvals); err != nil {
		return nil, mapErr(err)
	}
	if hasEvals {
		for _, gap := range gaps {
			if err := q(metricsEvalsSQL, args(gap[0], gap[1]), func(r pgx.Rows) error {
				if err := r.Scan(&i, &k, &c, &n); err != nil {
					return err
				}
				b.AddEvals(i, k, c, n)
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	return b.Result(), nil
}
