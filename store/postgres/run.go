package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// RunCreate implements store.Store.
func (s *Store) RunCreate(ctx context.Context, p *store.RunCreateParams) (*steptype.Run, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	r, err := rules.NewRun(p)
	if err != nil {
		return nil, err
	}
	var sess *steptype.Session
	if p.Session != nil {
		if sess, err = rules.NewSession(p.Session); err != nil {
			return nil, err
		}
	}
	if r.LeaseOwner != "" && p.LeaseFor > 0 {
		var now int64
		if err := s.pool.QueryRow(ctx, `SELECT `+dbNowSQL).Scan(&now); err != nil {
			return nil, mapErr(err)
		}
		r.LeaseExpires = fromNanos(now).Add(p.LeaseFor)
	}
	args, err := runArgs(r)
	if err != nil {
		return nil, err
	}
	q := `INSERT INTO runs (` + sqlrow.RunCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
		$11, $12, $13, $14, $15, $16, $17, $18, $19)`
	var c changes
	c.run(steptype.RunRunning, r)
	if ch := s.changesChannel(); len(c.payloads) > 0 && ch != "" {
		// One statement: the notification commits with the row.
		q = `WITH ins AS (` + q + ` RETURNING id) SELECT pg_notify($20, $21) FROM ins`
		args = append(args, ch, c.payloads[0])
	}
	if sess != nil {
		// The session and the run in one transaction, one round trip
		// (runTx: the errors below need the server's).
		_, err = runTx(s, ctx, func(tx *wtx) (struct{}, error) {
			b := &pgx.Batch{}
			b.Queue(sessionInsertSQL, sessionArgs(sess)...)
			b.Queue(q, args...)
			return struct{}{}, tx.send(ctx, b, true)
		})
		if pe := pgError(err); pe != nil && pe.Code == codeUniqueViolation && pe.TableName == "sessions" {
			return nil, rules.Conflict("session %q already exists", sess.ID)
		}
	} else {
		_, err = s.pool.Exec(ctx, q, args...)
	}
	switch {
	case err == nil:
	case isBusy(err):
		return nil, rules.SessionBusy(r.SessionID)
	case pgCode(err) == codeUniqueViolation:
		return nil, rules.Conflict("run %q already exists", r.ID)
	case pgCode(err) == codeForeignKeyViolation:
		return nil, rules.NotFound("session", r.SessionID)
	}
	if err != nil {
		return nil, mapErr(err)
	}
	return r, nil
}

// RunUpdate implements store.Store in two round trips: the run row is
// locked and read, the fences (owner, expected status) checked and the
// update applied by rules.UpdateRun, as in every driver, then the row is
// written and the transaction committed.
func (s *Store) RunUpdate(ctx context.Context, p *store.RunUpdateParams) (*steptype.Run, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckRunUpdate(p); err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) (*steptype.Run, error) {
		var r *steptype.Run
		var now int64
		var waiting []waitingStep
		b := &pgx.Batch{}
		b.Queue(`SELECT `+sqlrow.RunCols+` FROM runs WHERE id = $1 FOR NO KEY UPDATE`, p.ID).QueryRow(func(row pgx.Row) error {
			var err error
			r, err = sqlrow.ScanRun(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return rules.NotFound("run", p.ID)
			}
			return err
		})
		queueDBNow(b, &now)
		queueWaiting(b, "", []string{p.ID}, &waiting)
		if err := tx.send(ctx, b, false); err != nil {
			return nil, err
		}
		old := rules.CloneRun(r)
		if err := rules.UpdateRun(r, p, fromNanos(now)); err != nil {
			return nil, err
		}
		args, err := runUpdateArgs(r)
		if err != nil {
			return nil, err
		}
		b = &pgx.Batch{}
		b.Queue(runUpdateSQL, args...)
		if rules.Finishing(old, r) {
			if err := closeWaiting(b, waiting, r); err != nil {
				return nil, err
			}
		}
		var c changes
		c.run(old.Status, r)
		c.queue(b, s.changesChannel())
		if err := tx.send(ctx, b, true); err != nil {
			if isBusy(err) {
				return nil, rules.SessionBusy(r.SessionID)
			}
			return nil, err
		}
		return r, nil
	})
}

// claimSQL selects the oldest claimable runs, skipping the rows other
// transactions hold.
const claimSQL = `SELECT ` + sqlrow.RunCols + ` FROM runs
	WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_expires <= COALESCE($1, ` + dbNowSQL + `))
		AND (cardinality($3::text[]) = 0 OR agent = ANY($3))
	ORDER BY created_at, id LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED`

// RunClaim implements store.Store: the oldest claimable runs first. The
// candidates are selected FOR NO KEY UPDATE SKIP LOCKED, so any number of
// instances claim at once without waiting for each other, and a run is
// never leased twice: a row another claimer holds is skipped, and once it
// commits the run is no longer claimable. rules.Claimable and rules.Claim
// decide and apply the lease, as in every driver. Two round trips.
func (s *Store) RunClaim(ctx context.Context, p *store.RunClaimParams) ([]*steptype.Run, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	limit, now, err := rules.CheckClaim(p)
	if err != nil {
		return nil, err
	}
	return inTx(s, ctx, func(tx *wtx) ([]*steptype.Run, error) {
		var cands []*steptype.Run
		var dbNow int64
		b := &pgx.Batch{}
		var fixed any // the caller's clock, or NULL for the database's
		if !p.Now.IsZero() {
			fixed = nanos(now)
		}
		queueDBNow(b, &dbNow)
		var q *pgx.QueuedQuery
		if p.ID != "" {
			q = b.Queue(`SELECT `+sqlrow.RunCols+` FROM runs WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED`, p.ID)
		} else {
			agents := p.Agents
			if agents == nil {
				agents = []string{}
			}
			q = b.Queue(claimSQL, fixed, limit, agents)
		}
		q.Query(func(rows pgx.Rows) error {
			var err error
			cands, err = scanRuns(rows)
			return err
		})
		if err := tx.send(ctx, b, false); err != nil {
			return nil, err
		}
		if p.ID != "" && len(cands) == 0 {
			// Missing, or held by another transaction right now.
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, p.ID).Scan(&exists); err != nil {
				return nil, err
			}
			if !exists {
				return nil, rules.NotFound("run", p.ID)
			}
		}
		if p.Now.IsZero() {
			now = fromNanos(dbNow)
		}
		out := []*steptype.Run{}
		b = &pgx.Batch{}
		for _, r := range cands {
			if len(out) == limit || !rules.Claimable(r, p, now) {
				continue
			}
			rules.Claim(r, p, now)
			args, err := runUpdateArgs(r)
			if err != nil {
				return nil, err
			}
			b.Queue(runUpdateSQL, args...)
			out = append(out, r)
		}
		if b.Len() > 0 {
			return out, tx.send(ctx, b, true)
		}
		return out, nil
	})
}

// RunGet implements store.Store.
func (s *Store) RunGet(ctx context.Context, p *store.RunGetParams) (*steptype.Run, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("run id is required")
	}
	r, err := sqlrow.ScanRun(s.pool.QueryRow(ctx, `SELECT `+sqlrow.RunCols+` FROM runs WHERE id = $1`, p.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.NotFound("run", p.ID)
	}
	return r, mapErr(err)
}

// RunList implements store.Store.
func (s *Store) RunList(ctx context.Context, p *store.RunListParams) ([]*steptype.Run, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckRunList(p); err != nil {
		return nil, err
	}
	where := []string{"TRUE"}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.SessionID != "" {
		where = append(where, "session_id = "+arg(p.SessionID))
	}
	if p.ParentRunID != "" {
		where = append(where, "parent_run_id = "+arg(p.ParentRunID))
	}
	if p.Agent != "" {
		where = append(where, "agent = "+arg(p.Agent))
	}
	if len(p.Statuses) > 0 {
		// Inlined (CheckRunList allows known statuses only) so the partial
		// index on waiting runs applies: the engine's orphan sweep lists
		// them every 30 s.
		lits := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			lits[i] = "'" + string(st) + "'"
		}
		if len(lits) == 1 {
			where = append(where, "status = "+lits[0]) // what a partial index's WHERE matches
		} else {
			where = append(where, "status IN ("+strings.Join(lits, ", ")+")")
		}
	}
	q := `SELECT ` + sqlrow.RunCols + ` FROM runs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY created_at DESC, id DESC`
	if p.Limit > 0 {
		q += ` LIMIT ` + arg(p.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	runs, err := scanRuns(rows)
	return runs, mapErr(err)
}
