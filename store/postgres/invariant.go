package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// dbNowSQL is the database clock in unix nanoseconds (microsecond
// resolution), at the start of the transaction: leases are measured by the
// database, never by the clocks of the instances that share it.
const dbNowSQL = `((extract(epoch from now()) * 1000000)::bigint * 1000)`

// busyIndex is the partial unique index behind store.ErrSessionBusy.
const busyIndex = "runs_one_unfinished"

// Notifier returns the store: Notify and Listen reach every Store on the
// same schema, in any process.
func (s *Store) Notifier() store.Notifier { return s }

// isBusy reports a violation of the one-unfinished-run index.
func isBusy(err error) bool {
	pe := pgError(err)
	return pe != nil && pe.Code == codeUniqueViolation && pe.ConstraintName == busyIndex
}

// changesChannel is the PostgreSQL channel of store.ChannelChanges.
func (s *Store) changesChannel() string {
	name, _ := s.channelName(store.ChannelChanges)
	return name
}

// changes collects the store.ChannelChanges payloads of one write; they are
// queued into its last batch, so they commit (and are delivered) with it.
type changes struct {
	payloads []string
}

func (c *changes) step(sessionID string, seq int64) {
	c.add(store.ChangeStep(sessionID, seq))
}

// run records a run's change of status; claims (to running) are not
// announced: the claimer's own commits follow.
func (c *changes) run(oldStatus steptype.RunStatus, r *steptype.Run) {
	if r.Status != oldStatus && r.Status != steptype.RunRunning {
		c.add(store.ChangeRun(r.SessionID, r.ID, string(r.Status)))
	}
}

func (c *changes) add(p string) {
	if !slices.Contains(c.payloads, p) {
		c.payloads = append(c.payloads, p)
	}
}

// queue adds the notifications to b.
func (c *changes) queue(b *pgx.Batch, channel string) {
	if channel == "" {
		return
	}
	for _, p := range c.payloads {
		b.Queue(`SELECT pg_notify($1, $2)`, channel, p)
	}
}

// waitingStep is a waiting step read under its run's lock.
type waitingStep struct {
	runID string
	body  []byte
}

// waitingSQL reads the waiting steps of the runs $1.
const waitingSQL = `SELECT run_id, body FROM steps WHERE run_id = ANY($1) AND status = 'waiting'`

// queueWaiting reads the waiting steps of runIDs into dst; prefix starts
// the statement (a group's own text, see lockGroup).
func queueWaiting(b *pgx.Batch, prefix string, runIDs []string, dst *[]waitingStep) {
	b.Queue(prefix+waitingSQL, runIDs).Query(func(rows pgx.Rows) error {
		return collectWaiting(rows, dst)
	})
}

// queueDBNow reads the database clock into dst.
func queueDBNow(b *pgx.Batch, dst *int64) {
	b.Queue(`SELECT ` + dbNowSQL).QueryRow(func(row pgx.Row) error { return row.Scan(dst) })
}

// closeWaiting queues the closing of r's waiting steps (r has just
// finished), within the transaction that finishes it.
func closeWaiting(b *pgx.Batch, waiting []waitingStep, r *steptype.Run) error {
	for _, w := range waiting {
		if w.runID != r.ID {
			continue
		}
		st, err := rules.DecodeStep(w.body)
		if err != nil {
			return err
		}
		rules.CloseWaiting(st, r)
		body, err := rules.EncodeStep(st)
		if err != nil {
			return err
		}
		b.Queue(`UPDATE steps SET status = $1, body = $2 WHERE id = $3 AND status = 'waiting'`, string(st.Status), body, st.ID)
	}
	return nil
}

// RunLeaseRenew implements store.Store in one statement, on the database
// clock. The rows are locked in id order before they are updated, the
// order every other writer of several runs (a group of appends) takes
// them in: an UPDATE alone would lock them in the order it finds them and
// could deadlock with a group holding some of them.
func (s *Store) RunLeaseRenew(ctx context.Context, p *store.RunLeaseRenewParams) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckRenew(p); err != nil {
		return nil, err
	}
	if len(p.IDs) == 0 {
		return []string{}, nil
	}
	rows, err := s.pool.Query(ctx, `WITH locked AS (
			SELECT id FROM runs WHERE id = ANY($2) AND lease_owner = $3 AND status = 'running' ORDER BY id FOR NO KEY UPDATE)
		UPDATE runs SET lease_expires = `+dbNowSQL+` + $1 FROM locked WHERE runs.id = locked.id RETURNING runs.id`,
		int64(p.Lease), p.IDs, p.Owner)
	if err != nil {
		return nil, mapErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if ids == nil {
		ids = []string{}
	}
	return ids, mapErr(err)
}

// unfinishedRun returns an unfinished run of a session, or nil.
func unfinishedRun(ctx context.Context, tx *wtx, sessionID string) (*steptype.Run, error) {
	rows, err := tx.Query(ctx, `SELECT `+sqlrow.RunCols+` FROM runs
		WHERE session_id = $1 AND status IN ('queued', 'running', 'waiting') LIMIT 1`, sessionID)
	if err != nil {
		return nil, err
	}
	runs, err := scanRuns(rows)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return runs[0], nil
}

// StepExpiring implements store.Store from the steps_expiry index.
func (s *Store) StepExpiring(ctx context.Context, p *store.StepExpiringParams) ([]*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckExpiring(p); err != nil {
		return nil, err
	}
	var limit any // NULL: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT body FROM steps WHERE status = 'waiting' AND expires_at > 0 AND expires_at <= $1
		ORDER BY expires_at, id LIMIT $2`, nanos(p.Before), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	bodies, err := collect(rows, nil)
	if err != nil {
		return nil, mapErr(err)
	}
	return decodeBodies(bodies)
}
