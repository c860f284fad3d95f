package store

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
)

// RunCounter is the part of Store that counts runs by status without
// reading them (an agent's overview over its whole history stays one
// aggregate however many runs it has).
type RunCounter interface {
	// RunCount counts the runs of an agent by status; statuses without
	// runs are absent.
	RunCount(ctx context.Context, p *RunCountParams) (map[steptype.RunStatus]int, error)
}

// RunCountParams are the parameters of RunCounter.RunCount.
type RunCountParams struct {
	Agent string // required
}

// LatestRunReader is the part of Store that finds the newest top-level
// run of many sessions in one query (the sessions list shows each
// session's latest turn without one RunList per row).
type LatestRunReader interface {
	// RunLatest returns, for each session of p.SessionIDs with at least
	// one top-level run (hop 0), the newest of them (the first RunList
	// returns) and the number of its top-level runs. Sessions without
	// one, unknown sessions included, are absent.
	RunLatest(ctx context.Context, p *RunLatestParams) (map[string]LatestRun, error)
}

// RunLatestParams are the parameters of LatestRunReader.RunLatest.
type RunLatestParams struct {
	SessionIDs []string // at most 1000
}

// LatestRun is a session's newest top-level run and its count of them.
type LatestRun struct {
	RunID  string
	Status steptype.RunStatus
	Runs   int // top-level runs of the session
}

// MaxRunLatest bounds RunLatestParams.SessionIDs.
const MaxRunLatest = 1000
