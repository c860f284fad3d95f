package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rollup"
)

// The aggregate queries below join a row to its session only for a
// metadata split (SPLITJOIN), and look its agent up only for an agent
// filter (AGENT): without either, they read their index alone. KEY is the
// split value of a row (?6 itself, "", without a split).

// metricsStepsSQL aggregates the folded steps of a range (the partial
// minutes at the edges of a query; table step_times, migration 00200),
// first per
// run so that the lookups of the agent and the split key happen once per
// run and bucket, not once per step. Placeholders: ?1 start of the first
// bucket, ?2 bucket width, ?3 from, ?4 to (nanoseconds), ?5 agent or "",
// ?6 the JSON path of the split key or "". The tail is metricsTailSQL's.
const metricsStepsSQL = `WITH s AS (
	SELECT (s.created_at - ?1) / ?2 AS b, s.session_id, s.run_id, count(*) AS n,
		sum(s.kind = 'error' OR s.status = 'failed') AS e, sum(s.input_tokens) AS it, sum(s.output_tokens) AS ot,
		sum(s.cost) AS c
	FROM step_times t CROSS JOIN steps s ON s.rowid = t.step
	WHERE t.created_at >= ?3 AND t.created_at < ?4
	GROUP BY b, s.session_id, s.run_id)
SELECT s.b, KEY, sum(s.n), sum(s.e), sum(s.it), sum(s.ot), sum(s.c)
FROM s SPLITJOIN
WHERE AGENT
GROUP BY 1, 2`

// metricsStepsOldSQL is metricsStepsSQL on a schema before migration
// 00200 (a read-only store does not migrate), through steps_created.
const metricsStepsOldSQL = `WITH s AS (
	SELECT (created_at - ?1) / ?2 AS b, session_id, run_id, count(*) AS n,
		sum(kind = 'error' OR status = 'failed') AS e,
		sum(coalesce(m ->> '$.input_tokens', 0)) AS it, sum(coalesce(m ->> '$.output_tokens', 0)) AS ot,
		sum(coalesce(m ->> '$.cost', 0.0)) AS c
	FROM (SELECT created_at, session_id, run_id, kind, status, CAST(body AS TEXT) -> '$.metrics' AS m
		FROM steps INDEXED BY steps_created WHERE created_at >= ?3 AND created_at < ?4)
	GROUP BY b, session_id, run_id)
SELECT s.b, KEY, sum(s.n), sum(s.e), sum(s.it), sum(s.ot), sum(s.c)
FROM s SPLITJOIN
WHERE AGENT
GROUP BY 1, 2`

// metricsTailSQL aggregates the steps of the tail (rowid above the mark
// ?7, migration 00200) in the whole range, as metricsStepsSQL does: the
// rollups and hours hold the folded steps only. It reads the tail's rowid
// range (NOT INDEXED: never steps_created over the range), at most a few
// hundred rows.
const metricsTailSQL = `WITH s AS (
	SELECT (created_at - ?1) / ?2 AS b, session_id, run_id, count(*) AS n,
		sum(kind = 'error' OR status = 'failed') AS e, sum(input_tokens) AS it, sum(output_tokens) AS ot, sum(cost) AS c
	FROM steps NOT INDEXED WHERE rowid > ?7 AND created_at >= ?3 AND created_at < ?4
	GROUP BY b, session_id, run_id)
SELECT s.b, KEY, sum(s.n), sum(s.e), sum(s.it), sum(s.ot), sum(s.c)
FROM s SPLITJOIN
WHERE AGENT
GROUP BY 1, 2`

// metricsRollupsSQL aggregates the per-minute rollups of whole minutes
// (table step_rollups, the folded steps); same placeholders but ?7, ?3 and
// ?4 on minute boundaries.
const metricsRollupsSQL = `SELECT (s.minute - ?1) / ?2, KEY, sum(s.steps), sum(s.errors),
	sum(s.input_tokens), sum(s.output_tokens), sum(s.cost)
FROM step_rollups s SPLITJOIN
WHERE s.minute >= ?3 AND s.minute < ?4 AND AGENT
GROUP BY 1, 2`

// metricsRunsSQL lists the runs finished in the range (index runs_finished,
// which covers it without a split); the percentiles are computed by the
// builder.
const metricsRunsSQL = `SELECT (s.finished_at - ?1) / ?2, KEY, s.status = 'failed',
	(s.finished_at - s.created_at)
FROM runs s INDEXED BY runs_finished SPLITJOIN
WHERE s.finished_at >= ?3 AND s.finished_at < ?4 AND s.finished_at > 0 AND (?5 = '' OR s.agent = ?5)`

// metricsEvalsSQL sums eval scores per bucket (index evals_created).
const metricsEvalsSQL = `SELECT (s.created_at - ?1) / ?2 AS b, KEY, sum(s.score), count(*)
FROM evals s SPLITJOIN
WHERE s.created_at >= ?3 AND s.created_at < ?4 AND AGENT
GROUP BY 1, 2`

// metricsAgentSQL is the agent filter of a row s with a session_id and a
// run_id: the run's agent, or the session's for a row outside a run.
const metricsAgentSQL = `coalesce((SELECT r.agent FROM runs r WHERE r.id = s.run_id AND s.run_id <> ''),
	(SELECT ses.agent FROM sessions ses WHERE ses.id = s.session_id)) = ?5`

// metricsSQL returns text with its SPLITJOIN, KEY and AGENT parts for p.
func metricsSQL(text string, p *store.MetricsParams) string {
	join, key, agent := "", "?6", "?5 = ''"
	if p.Split != "" {
		join = "JOIN sessions ses ON ses.id = s.session_id"
		key = "coalesce(CAST(ses.metadata AS TEXT) -> ?6, '')"
	}
	if p.Agent != "" {
		agent = metricsAgentSQL
	}
	return strings.NewReplacer("SPLITJOIN", join, "KEY", key, "AGENT", agent).Replace(text)
}

// Metrics implements store.MetricsStore: the complete past hours of a
// query without a split from the hour table (metricsHours, migration
// 00080), the rest with four aggregate queries, and the steps of the tail
// (migration 00200), all in one read transaction.
func (s *Store) Metrics(ctx context.Context, p *store.MetricsParams) (*store.Metrics, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	var rtx *sql.Tx
	defer func() {
		if rtx != nil {
			_ = rtx.Rollback()
		}
	}()
	// begin starts the read transaction of the rest, after a fold of
	// hours: the hour rows, the rollups and the tail are of one snapshot.
	begin := func() (*sql.Tx, error) {
		if rtx != nil {
			_ = rtx.Rollback()
		}
		var err error
		rtx, err = s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		return rtx, mapErr(err)
	}
	b := rollup.NewBuilder(p)
	gaps, err := s.metricsHours(ctx, p, b, begin)
	if err != nil {
		return nil, err
	}
	if rtx == nil {
		if _, err := begin(); err != nil {
			return nil, err
		}
	}
	tx := rtx
	upto, err := readUpto(ctx, tx)
	if err != nil {
		return nil, mapErr(err)
	}
	// ?5 and ?6 are always bound (the driver wants every argument used);
	// without a split ?6 is "" and so is every key.
	path := ""
	if p.Split != "" {
		path = `$."` + p.Split + `"`
	}
	args := func(from, to int64) []any {
		return []any{nanos(p.Start()), int64(p.Bucket.Duration()), from, to, p.Agent, path}
	}
	q := func(sqlText string, args []any, row func(*sql.Rows) error) error {
		rows, err := tx.QueryContext(ctx, metricsSQL(sqlText, p), args...)
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
	)
	addSteps := func(r *sql.Rows) error {
		if err := r.Scan(&i, &k, &n, &e, &it, &ot, &c); err != nil {
			return err
		}
		b.AddSteps(i, k, n, e, it, ot, c)
		return nil
	}
	// The runs are the most rows (one per run finished in the range): read
	// without a split, they carry no key column.
	runsSQL, dest := metricsRunsSQL, []any{&i, &k, &runs, &n}
	if p.Split == "" {
		runsSQL, dest = strings.Replace(runsSQL, "KEY, ", "", 1), []any{&i, &runs, &n}
	}
	addRun := func(r *sql.Rows) error {
		if err := r.Scan(dest...); err != nil {
			return err
		}
		b.AddRuns(i, k, 1, runs)
		b.AddLatency(i, k, float64(n)/1e6)
		return nil
	}
	for _, gap := range gaps {
		for _, part := range rollup.PartsOf(gap[0], gap[1]) {
			text := metricsStepsSQL
			if part.Rollup && p.Split == "" && p.Agent == "" && (part.To-part.From)/int64(p.Bucket.Duration()) < metricsLoopBuckets {
				if err := metricsRollupBuckets(ctx, tx, p, part, b); err != nil {
					return nil, err
				}
				continue
			}
			switch {
			case part.Rollup:
				text = metricsRollupsSQL
			case upto == noFold:
				text = metricsStepsOldSQL
			}
			if err := q(text, args(part.From, part.To), addSteps); err != nil {
				return nil, err
			}
		}
		if err := q(runsSQL, args(gap[0], gap[1]), addRun); err != nil {
			return nil, err
		}
	}
	if upto != noFold {
		if err := q(metricsTailSQL, append(args(nanos(p.From), nanos(p.To)), upto), addSteps); err != nil {
			return nil, err
		}
	}
	for _, gap := range gaps {
		if err := q(metricsEvalsSQL, args(gap[0], gap[1]), func(r *sql.Rows) error {
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

// metricsLoopBuckets is the number of buckets under which the whole
// minutes of a query of all agents without a split are read one bucket at a
// time (metricsRollupBuckets); with more, the per-query cost outweighs the
// sort it saves, and with an agent filter the per-row agent lookups
// dominate either way.
const metricsLoopBuckets = 200

// metricsRollupSumSQL sums the rollups of one bucket's whole minutes, ?3 to
// ?4 (?1 and ?2 unused), for metricsRollupBuckets.
const metricsRollupSumSQL = `SELECT coalesce(sum(s.steps), 0), coalesce(sum(s.errors), 0),
	coalesce(sum(s.input_tokens), 0), coalesce(sum(s.output_tokens), 0), coalesce(sum(s.cost), 0.0), ?6
FROM step_rollups s
WHERE s.minute >= ?3 AND s.minute < ?4 AND AGENT`

// metricsRollupBuckets reads the whole minutes of part without a split one
// bucket at a time: a range sum in the rollups' key order per bucket costs
// a third of one GROUP BY over the whole range, which sorts every rollup
// row by bucket.
func metricsRollupBuckets(ctx context.Context, tx *sql.Tx, p *store.MetricsParams, part rollup.Part, b *rollup.Builder) error {
	stmt, err := tx.PrepareContext(ctx, metricsSQL(metricsRollupSumSQL, p))
	if err != nil {
		return mapErr(err)
	}
	defer stmt.Close()
	start, d := nanos(p.Start()), int64(p.Bucket.Duration())
	var (
		n, e, it, ot int64
		c            float64
		k            string
	)
	for lo := part.From; lo < part.To; {
		i := (lo - start) / d
		hi := min(start+(i+1)*d, part.To)
		err := stmt.QueryRowContext(ctx, nanos(p.Start()), d, lo, hi, p.Agent, "").Scan(&n, &e, &it, &ot, &c, &k)
		if err != nil {
			return mapErr(err)
		}
		if n != 0 {
			b.AddSteps(int(i), "", n, e, it, ot, c)
		}
		lo = hi
	}
	return nil
}
