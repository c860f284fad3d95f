package store

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
)

// SessionStatsReader is the part of Store that keeps, as steps and runs
// are written, per-session totals: a session's summary is then a few
// rows however long the session is.
type SessionStatsReader interface {
	// SessionStats returns the totals of the step rows stored under the
	// session's id (its own steps: not those a fork inherits, but the
	// imported copies of them a fork holds before SessionDetach) and of
	// its runs, or ErrNotFound.
	SessionStats(ctx context.Context, p *SessionStatsParams) (*SessionStats, error)
}

// SessionStatsParams are the parameters of SessionStatsReader.SessionStats.
type SessionStatsParams struct {
	ID string
}

// SessionStats are a session's totals.
type SessionStats struct {
	// Steps has one entry per kind and role with steps (in no order).
	Steps []StepStat
	// Runs counts the session's runs by status (sub-agent runs included).
	Runs map[steptype.RunStatus]int
}

// StepStat totals the steps of one kind and role.
type StepStat struct {
	Kind         steptype.Kind
	Role         steptype.Role
	Steps        int64
	InputTokens  int64
	OutputTokens int64
	CachedTokens int64
	Cost         float64
}
