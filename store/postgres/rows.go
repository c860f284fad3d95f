package postgres

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// Column lists, in the order the scan functions read them.
const (
	sessionCols = `id, agent, title, COALESCE(parent_session_id, ''), fork_sequence, last_seq,
		input_tokens, output_tokens, cost, metadata, created_at, updated_at`
)

// nanos stores a time as UTC unix nanoseconds; the zero time is 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// blob binds b as bytea, or NULL when it is empty.
func blob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// nullString binds s, or NULL when it is empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func scanSession(row pgx.Row) (*steptype.Session, error) {
	var s steptype.Session
	var meta []byte
	var created, updated int64
	err := row.Scan(&s.ID, &s.Agent, &s.Title, &s.ParentSessionID, &s.ForkSequence, &s.LastSequence,
		&s.InputTokens, &s.OutputTokens, &s.Cost, &meta, &created, &updated)
	if err != nil {
		return nil, err
	}
	s.Metadata = rules.Raw(meta)
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

func sessionArgs(s *steptype.Session) []any {
	return []any{s.ID, s.Agent, s.Title, nullString(s.ParentSessionID), s.ForkSequence, s.LastSequence,
		s.InputTokens, s.OutputTokens, s.Cost, blob(s.Metadata), nanos(s.CreatedAt), nanos(s.UpdatedAt)}
}

// scanRuns reads every row of rows as a run.
func scanRuns(rows pgx.Rows) ([]*steptype.Run, error) {
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

func runErrorJSON(e *steptype.StepError) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	return json.Marshal(e)
}

func runArgs(r *steptype.Run) ([]any, error) {
	errb, err := runErrorJSON(r.Error)
	if err != nil {
		return nil, err
	}
	return []any{r.ID, r.SessionID, r.Agent, r.ParentRunID, r.ParentStepID, r.Hop, string(r.Status), r.Cursor,
		blob(r.State), r.Input, r.Output, errb, r.StepCount, blob(r.Options), r.LeaseOwner,
		nanos(r.LeaseExpires), nanos(r.CreatedAt), nanos(r.UpdatedAt), nanos(r.FinishedAt)}, nil
}

// runUpdateSQL writes every mutable column of a run; the values come from
// rules.UpdateRun (or Claim, Requeue) applied to the locked row.
const runUpdateSQL = `UPDATE runs SET status = $1, cursor = $2, state = $3, output = $4, error = $5, step_count = $6,
	options = $7, lease_owner = $8, lease_expires = $9, updated_at = $10, finished_at = $11 WHERE id = $12`

func runUpdateArgs(r *steptype.Run) ([]any, error) {
	errb, err := runErrorJSON(r.Error)
	if err != nil {
		return nil, err
	}
	return []any{string(r.Status), r.Cursor, blob(r.State), r.Output, errb, r.StepCount, blob(r.Options),
		r.LeaseOwner, nanos(r.LeaseExpires), nanos(r.UpdatedAt), nanos(r.FinishedAt), r.ID}, nil
}

// collect reads rows of one bytea column.
func collect(rows pgx.Rows, bodies [][]byte) ([][]byte, error) {
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		bodies = append(bodies, b)
	}
	return bodies, rows.Err()
}

// decodeBodies decodes stored step bodies (rules.DecodeSteps).
func decodeBodies(bodies [][]byte) ([]*steptype.Step, error) { return rules.DecodeSteps(bodies) }
