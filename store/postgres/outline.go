package postgres

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// StepOutline implements store.StepOutliner: the bodies StepList reads,
// decoded without their bulky members.
func (s *Store) StepOutline(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	bodies, err := s.stepBodies(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]*steptype.Step, 0, len(bodies))
	for _, b := range bodies {
		st, err := rules.DecodeOutline(b)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
