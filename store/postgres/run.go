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
	args, err := runArgs(r)
	if err != nil {
		return nil, err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO runs (`+runCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
		$11, $12, $13, $14, $15, $16, $17, $18, $19)`, args...)
	switch pgCode(err) {
	case "":
	case codeUniqueViolation:
		return nil, rules.Conflict("run %q already exists", r.ID)
	case codeForeignKeyViolation:
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
		b := &pgx.Batch{}
		b.Queue(`SELECT `+runCols+` FROM runs WHERE id = $1 FOR NO KEY UPDATE`, p.ID).QueryRow(func(row pgx.Row) error {
			var err error
			r, err = scanRun(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return rules.NotFound("run", p.ID)
			}
			return err
		})
		if err := tx.send(ctx, b, false); err != nil {
			return nil, err
		}
		if err := rules.UpdateRun(r, p); err != nil {
			return nil, err
		}
		args, err := runUpdateArgs(r)
		if err != nil {
			return nil, err
		}
		b = &pgx.Batch{}
		b.Queue(runUpdateSQL, args...)
		return r, tx.send(ctx, b, true)
	})
}

// claimSQL selects the oldest claimable runs, skipping the rows other
// transactions hold.
const claimSQL = `SELECT ` + runCols + ` FROM runs
	WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_expires <= $1)
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
		b := &pgx.Batch{}
		var q *pgx.QueuedQuery
		if p.ID != "" {
			q = b.Queue(`SELECT `+runCols+` FROM runs WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED`, p.ID)
		} else {
			q = b.Queue(claimSQL, nanos(now), limit)
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
		out := []*steptype.Run{}
		b = &pgx.Batch{}
		for _, r := range cands {
			if len(out) == limit || !rules.Claimable(r, now) {
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
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1`, p.ID))
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
		sts := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			sts[i] = string(st)
		}
		where = append(where, "status = ANY("+arg(sts)+")")
	}
	q := `SELECT ` + runCols + ` FROM runs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY created_at DESC, id DESC`
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
