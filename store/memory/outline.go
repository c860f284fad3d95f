package memory

import (
	"context"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// StepOutline implements store.StepOutliner: StepList's steps, outlined.
func (m *Store) StepOutline(ctx context.Context, p *store.StepListParams) ([]*steptype.Step, error) {
	steps, err := m.StepList(ctx, p)
	if err != nil {
		return nil, err
	}
	for i, s := range steps {
		steps[i] = rules.OutlineOf(s)
	}
	return steps, nil
}
