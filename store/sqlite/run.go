package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// RunCreate implements store.Store.
func (s *Store) RunCreate(ctx context.Context, p *store.RunCreateParams) (*steptype.Run, error) {
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
	return write(s, ctx, func(tx *wtx) (*steptype.Run, error) {
		if sess != nil {
			if err := tx.insertSession(sess); err != nil {
				return nil, err
			}
		} else if _, err := tx.session(r.SessionID); err != nil {
			return nil, err
		}
		if r.LeaseOwner != "" && p.LeaseFor > 0 {
			now, err := tx.dbNow()
			if err != nil {
				return nil, err
			}
			r.LeaseExpires = now.Add(p.LeaseFor)
		}
		return rules.CloneRun(r), tx.insertRun(r)
	})
}

// RunUpdate implements store.Store.
func (s *Store) RunUpdate(ctx context.Context, p *store.RunUpdateParams) (*steptype.Run, error) {
	if err := rules.CheckRunUpdate(p); err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) (*steptype.Run, error) { return tx.updateRun(p) })
}

// RunClaim implements store.Store: the oldest claimable runs first. Claims
// are serialized by the writer, so no run is leased twice.
func (s *Store) RunClaim(ctx context.Context, p *store.RunClaimParams) ([]*steptype.Run, error) {
	limit, now, err := rules.CheckClaim(p)
	if err != nil {
		return nil, err
	}
	return write(s, ctx, func(tx *wtx) ([]*steptype.Run, error) {
		now := now
		if p.Now.IsZero() {
			var err error
			if now, err = tx.dbNow(); err != nil {
				return nil, err
			}
		}
		var cands []*steptype.Run
		if p.ID != "" {
			r, err := tx.run(p.ID)
			if err != nil {
				return nil, err
			}
			cands = append(cands, r)
		} else {
			q, args := `SELECT `+sqlrow.RunCols+` FROM runs
				WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_expires <= ?)`, []any{nanos(now)}
			if len(p.Agents) > 0 {
				q += ` AND agent IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(p.Agents)), ", ") + `)`
				for _, a := range p.Agents {
					args = append(args, a)
				}
			}
			rows, err := tx.conn().QueryContext(bg, q+` ORDER BY created_at, id LIMIT ?`, append(args, limit)...)
			if err != nil {
				return nil, err
			}
			if cands, err = scanRuns(rows); err != nil {
				return nil, err
			}
		}
		out := []*steptype.Run{}
		for _, r := range cands {
			if len(out) == limit || !rules.Claimable(r, p, now) {
				continue
			}
			rules.Claim(r, p, now)
			if err := tx.saveRun(nil, r); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	})
}

func scanRuns(rows *sql.Rows) ([]*steptype.Run, error) {
	defer rows.Close()
	out := []*steptype.Run{}
	for rows.Next() {
		r, err := sqlrow.ScanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RunGet implements store.Store.
func (s *Store) RunGet(ctx context.Context, p *store.RunGetParams) (*steptype.Run, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("run id is required")
	}
	r, err := sqlrow.ScanRun(s.rdb.QueryRowContext(ctx, `SELECT `+sqlrow.RunCols+` FROM runs WHERE id = ?`, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
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
	where := []string{"1 = 1"}
	var args []any
	if p.SessionID != "" {
		where, args = append(where, "session_id = ?"), append(args, p.SessionID)
	}
	if p.ParentRunID != "" {
		where, args = append(where, "parent_run_id = ?"), append(args, p.ParentRunID)
	}
	if p.Agent != "" {
		where, args = append(where, "agent = ?"), append(args, p.Agent)
	}
	if len(p.Statuses) > 0 {
		// Inlined (CheckRunList allows known statuses only) so the partial
		// index on waiting runs applies: the engine's orphan sweep lists
		// them every 30 s, which was a scan of every run.
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
		q += ` LIMIT ?`
		args = append(args, p.Limit)
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	runs, err := scanRuns(rows)
	return runs, mapErr(err)
}
