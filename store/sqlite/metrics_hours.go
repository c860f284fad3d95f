package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rollup"
)

// The hour table (metric_hours, migration 00080) holds the totals of
// complete past hours per agent. A query folds the hours it needs that are
// missing (metricsFold, on the writer, so that no write can slip between
// what it reads and what it stores), then reads them; the triggers of the
// migration delete the hours any later write changes.

// metricsHours adds the folded complete hours of p to b and returns the
// ranges left to read from the rollups and runs (all of [From, To) when
// the table cannot serve p).
//
// Each read of the hour rows runs in a new read transaction from begin,
// which the caller goes on reading in: the hours it reads and the rows it
// reads after are of one snapshot.
func (s *Store) metricsHours(ctx context.Context, p *store.MetricsParams, b *rollup.Builder, begin func() (*sql.Tx, error)) ([][2]int64, error) {
	whole := [][2]int64{{nanos(p.From), nanos(p.To)}}
	h0, h1, ok := rollup.HourSpan(p, time.Now())
	if !ok {
		return whole, nil
	}
	var fold func([]int64) (bool, error)
	if s.w == nil {
		// A read-only store may be on a schema before migration 80 (it
		// does not migrate): without the table, everything is read as
		// before; with it, nothing is folded.
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'metric_hours'`).Scan(&n); err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return whole, nil
		}
	} else {
		fold = func(hours []int64) (bool, error) {
			_, err := write(s, ctx, func(tx *wtx) (struct{}, error) {
				return struct{}{}, metricsFold(tx.conn(), hours)
			})
			return err == nil, err
		}
	}
	return rollup.FromHours(ctx, p, h0, h1,
		func(h0, h1 int64) (*rollup.HourRows, error) {
			tx, err := begin()
			if err != nil {
				return nil, err
			}
			return metricsHourRows(ctx, tx, p, b, h0, h1)
		},
		fold)
}

// metricsHourRows reads the rows of [h0, h1) that p needs: the agent ”
// rows (each hour's total, which marks it folded; its durations only
// without an agent filter) and the filter's agent's rows. The primary key
// (agent, hour) makes each a contiguous range.
func metricsHourRows(ctx context.Context, tx *sql.Tx, p *store.MetricsParams, b *rollup.Builder, h0, h1 int64) (*rollup.HourRows, error) {
	rows, err := tx.QueryContext(ctx, `SELECT hour, agent, steps, errors, input_tokens, output_tokens, cost,
	runs, runs_failed, CASE WHEN agent = ?3 THEN durations END, eval_sum, evals
FROM metric_hours WHERE agent IN ('', ?3) AND hour >= ?1 AND hour < ?2
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
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryHours(ctx context.Context, db queryer, h0, h1 int64) ([]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT hour FROM metric_hours WHERE agent = '' AND hour >= ? AND hour < ? ORDER BY hour`, h0, h1)
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

// metricsFoldStepsSQL sums the rollups of [?1, ?2) per hour and agent, the
// agent attributed as the metrics filter does (metricsAgentSQL).
const metricsFoldStepsSQL = `SELECT s.minute - s.minute % 3600000000000, coalesce((SELECT r.agent FROM runs r WHERE r.id = s.run_id AND s.run_id <> ''),
		(SELECT ses.agent FROM sessions ses WHERE ses.id = s.session_id), ''),
	sum(s.steps), sum(s.errors), sum(s.input_tokens), sum(s.output_tokens), sum(s.cost)
FROM step_rollups s
WHERE s.minute >= ?1 AND s.minute < ?2
GROUP BY 1, 2`

// metricsFoldRunsSQL lists the runs finished in [?1, ?2) (runs_finished
// covers it).
const metricsFoldRunsSQL = `SELECT finished_at - finished_at % 3600000000000, agent, status = 'failed', finished_at - created_at
FROM runs INDEXED BY runs_finished
WHERE finished_at >= ?1 AND finished_at < ?2 AND finished_at > 0`

// metricsFoldEvalsSQL sums the eval scores of [?1, ?2) per hour and
// agent (attributed as metricsAgentSQL).
const metricsFoldEvalsSQL = `SELECT s.created_at - s.created_at % 3600000000000, coalesce((SELECT r.agent FROM runs r WHERE r.id = s.run_id AND s.run_id <> ''),
		(SELECT ses.agent FROM sessions ses WHERE ses.id = s.session_id), ''),
	sum(s.score), count(*)
FROM evals s
WHERE s.created_at >= ?1 AND s.created_at < ?2
GROUP BY 1, 2`

// metricsFoldTotalsSQL sums the costs of the rollups and the eval scores
// of [?1, ?2) per hour over all agents: the totals' float sums are SQL's
// own over the rows (as a query of all agents without the table reads
// them), not a sum of the agents'.
const metricsFoldTotalsSQL = `SELECT minute - minute % 3600000000000, 0, sum(cost) FROM step_rollups WHERE minute >= ?1 AND minute < ?2 GROUP BY 1
UNION ALL
SELECT created_at - created_at % 3600000000000, 1, sum(score) FROM evals WHERE created_at >= ?1 AND created_at < ?2 GROUP BY 1`

// metricsFoldSQL are the aggregate queries of a fold.
var metricsFoldSQL = rollup.FoldSQL{Steps: metricsFoldStepsSQL, Runs: metricsFoldRunsSQL, Evals: metricsFoldEvalsSQL, Totals: metricsFoldTotalsSQL}

// metricsFold computes and stores the hours (sorted) that are still
// missing, in the writer's transaction.
func metricsFold(c *sql.Conn, hours []int64) error {
	lo, hi := hours[0], hours[len(hours)-1]+rollup.HourNanos
	folded, err := queryHours(bg, c, lo, hi)
	if err != nil {
		return err
	}
	f := rollup.NewHourFold(hours, folded)
	if f.Empty() {
		return nil
	}
	err = f.Read(metricsFoldSQL, func(query string, dest []any, row func()) error {
		return eachRow(c, query, lo, hi, func(r *sql.Rows) error {
			if err := r.Scan(dest...); err != nil {
				return err
			}
			row()
			return nil
		})
	})
	if err != nil {
		return err
	}
	return f.Rows(func(values ...any) error {
		_, err := c.ExecContext(bg, `INSERT INTO metric_hours VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, values...)
		return err
	})
}

func eachRow(c *sql.Conn, text string, lo, hi int64, fn func(*sql.Rows) error) error {
	rows, err := c.QueryContext(bg, text, lo, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
