package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rollup"
)

// The hour table (metric_hours, migration 00080) holds the totals of
// complete past hours per agent. A query folds the hours it needs that are
// missing (metricsFold, under the exclusive advisory lock that every
// invalidating write takes shared), then reads them; the triggers of the
// migration delete the hours any later write changes.

// metricsFoldWait bounds how long a fold waits for the writers in flight
// (and makes new ones wait behind it); past it, the query reads the
// missing hours from the per-minute rollups, the steps and the runs.
const metricsFoldWait = "100ms"

// metricsHours adds the folded complete hours of p to b and returns the
// ranges left to read from the rollups and runs (all of [From, To) when
// the table cannot serve p).
func (s *Store) metricsHours(ctx context.Context, p *store.MetricsParams, b *rollup.Builder) ([][2]int64, error) {
	h0, h1, ok := rollup.HourSpan(p, time.Now())
	if !ok {
		return [][2]int64{{nanos(p.From), nanos(p.To)}}, nil
	}
	return rollup.FromHours(ctx, p, h0, h1,
		func(h0, h1 int64) (*rollup.HourRows, error) { return s.metricsHourRows(ctx, p, b, h0, h1) },
		func(hours []int64) (bool, error) { return s.metricsFold(ctx, hours) })
}

// metricsHourRows reads the rows of [h0, h1) that p needs: the agent ”
// rows (each hour's total, which marks it folded; its durations only
// without an agent filter) and the filter's agent's rows. The primary key
// (agent, hour) makes each a contiguous range.
func (s *Store) metricsHourRows(ctx context.Context, p *store.MetricsParams, b *rollup.Builder, h0, h1 int64) (*rollup.HourRows, error) {
	rows, err := s.pool.Query(ctx, `SELECT hour, agent, steps, errors, input_tokens, output_tokens, cost,
	runs, runs_failed, CASE WHEN agent = $3::text THEN durations END, eval_sum, evals
FROM metric_hours WHERE agent IN ('', $3::text) AND hour >= $1 AND hour < $2
ORDER BY agent, hour`, h0, h1, p.Agent)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	hr := rollup.NewHourRows(p, b)
	for rows.Next() {
		if err := hr.Scan(rows); err != nil {
			return nil, mapErr(err)
		}
	}
	return hr, mapErr(rows.Err())
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryHours returns the folded hours in [h0, h1), sorted.
func queryHours(ctx context.Context, db queryer, h0, h1 int64) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT hour FROM metric_hours WHERE agent = '' AND hour >= $1 AND hour < $2 ORDER BY hour`, h0, h1)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var h int64
		if err := rows.Scan(&h); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, h)
	}
	return out, mapErr(rows.Err())
}

// metricsFoldStepsSQL sums the rollups of [$1, $2) (folded and pending,
// migration 00101) per hour and agent, the agent attributed as the
// metrics filter does (metricsAgentSQL).
const metricsFoldStepsSQL = `SELECT s.minute - s.minute % 3600000000000, COALESCE((SELECT r.agent FROM runs r WHERE r.id = s.run_id AND s.run_id <> ''),
		(SELECT ses.agent FROM sessions ses WHERE ses.id = s.session_id), ''),
	sum(s.steps)::bigint, sum(s.errors)::bigint, sum(s.input_tokens)::bigint, sum(s.output_tokens)::bigint, sum(s.cost)::float8
FROM step_rollups_all s
WHERE s.minute >= $1 AND s.minute < $2
GROUP BY 1, 2`

// metricsFoldRunsSQL lists the runs finished in [$1, $2).
const metricsFoldRunsSQL = `SELECT finished_at - finished_at % 3600000000000, agent, status = 'failed', finished_at - created_at
FROM runs
WHERE finished_at >= $1 AND finished_at < $2 AND finished_at > 0`

// metricsFoldEvalsSQL sums the eval scores of [$1, $2) per hour and
// agent (attributed as metricsAgentSQL).
const metricsFoldEvalsSQL = `SELECT s.created_at - s.created_at % 3600000000000, COALESCE((SELECT r.agent FROM runs r WHERE r.id = s.run_id AND s.run_id <> ''),
		(SELECT ses.agent FROM sessions ses WHERE ses.id = s.session_id), ''),
	sum(s.score)::float8, count(*)
FROM evals s
WHERE s.created_at >= $1 AND s.created_at < $2
GROUP BY 1, 2`

// metricsFoldTotalsSQL sums the costs of the rollups and the eval scores
// of [$1, $2) per hour over all agents: the totals' float sums are SQL's
// own over the rows (as a query of all agents without the table reads
// them), not a sum of the agents'.
const metricsFoldTotalsSQL = `SELECT minute - minute % 3600000000000, false, sum(cost)::float8 FROM step_rollups_all WHERE minute >= $1 AND minute < $2 GROUP BY 1
UNION ALL
SELECT created_at - created_at % 3600000000000, true, sum(score)::float8 FROM evals WHERE created_at >= $1 AND created_at < $2 GROUP BY 1`

// metricsFoldSQL are the aggregate queries of a fold.
var metricsFoldSQL = rollup.FoldSQL{Steps: metricsFoldStepsSQL, Runs: metricsFoldRunsSQL, Evals: metricsFoldEvalsSQL, Totals: metricsFoldTotalsSQL}

// metricsFold computes and stores the hours (sorted) that are still
// missing, in a transaction of its own under the exclusive advisory lock;
// false when the lock was not had within metricsFoldWait.
func (s *Store) metricsFold(ctx context.Context, hours []int64) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, mapErr(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+metricsFoldWait+`'`); err != nil {
		return false, mapErr(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(730510, hashtext(current_schema()))`); err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
			return false, nil
		}
		return false, mapErr(err)
	}
	lo, hi := hours[0], hours[len(hours)-1]+rollup.HourNanos
	folded, err := queryHours(ctx, tx, lo, hi)
	if err != nil {
		return false, err
	}
	f := rollup.NewHourFold(hours, folded)
	if f.Empty() {
		return true, nil
	}
	err = f.Read(metricsFoldSQL, func(query string, dest []any, row func()) error {
		rows, err := tx.Query(ctx, query, lo, hi)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, dest, func() error { row(); return nil })
		return err
	})
	if err != nil {
		return false, mapErr(err)
	}
	batch := &pgx.Batch{}
	_ = f.Rows(func(values ...any) error {
		batch.Queue(`INSERT INTO metric_hours VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, values...)
		return nil
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return false, mapErr(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, mapErr(err)
	}
	return true, nil
}
