package sqlite

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// Column lists, in the order the scan functions read them.
const (
	sessionCols = `id, agent, title, parent_session_id, fork_sequence, last_seq,
		input_tokens, output_tokens, cost, metadata, created_at, updated_at`
)

type scanner = sqlrow.Scanner

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

// blob binds b, or NULL when it is empty.
func blob(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// nullString binds s, or NULL when it is empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func scanSession(sc scanner) (*steptype.Session, error) {
	var s steptype.Session
	var parent sql.NullString
	var meta []byte
	var created, updated int64
	err := sc.Scan(&s.ID, &s.Agent, &s.Title, &parent, &s.ForkSequence, &s.LastSequence,
		&s.InputTokens, &s.OutputTokens, &s.Cost, &meta, &created, &updated)
	if err != nil {
		return nil, err
	}
	s.ParentSessionID = parent.String
	s.Metadata = rules.Raw(meta)
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

func sessionArgs(s *steptype.Session) []any {
	return []any{s.ID, s.Agent, s.Title, nullString(s.ParentSessionID), s.ForkSequence, s.LastSequence,
		s.InputTokens, s.OutputTokens, s.Cost, blob(s.Metadata), nanos(s.CreatedAt), nanos(s.UpdatedAt)}
}

func runErrorJSON(e *steptype.StepError) (any, error) {
	if e == nil {
		return nil, nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return b, nil
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

// decodeBodies decodes stored step bodies (rules.DecodeSteps).
func decodeBodies(bodies [][]byte) ([]*steptype.Step, error) { return rules.DecodeSteps(bodies) }
