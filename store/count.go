package store

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
)

// RunCounter is the optional interface of stores that count runs by
// status without reading them (an agent's overview over its whole history
// stays one indexed aggregate however many runs it has).
//
// Check for it with a type assertion:
//
//	rc, ok := st.(store.RunCounter)
type RunCounter interface {
	// RunCount counts the runs of an agent by status; statuses without
	// runs are absent.
	RunCount(ctx context.Context, p *RunCountParams) (map[steptype.RunStatus]int, error)
}

// RunCountParams are the parameters of RunCounter.RunCount.
type RunCountParams struct {
	Agent string // required
}
