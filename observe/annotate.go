package observe

import (
	"context"
	"fmt"
	"slices"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// Annotate sets annotation fields of a committed step (state, goal, action,
// or their summaries) through the API: nil fields are left, the step row is
// never rewritten. It fails with store.ErrNotFound for an unknown step.
func Annotate(ctx context.Context, st store.Store, p *store.AnnotationPutParams) (*store.Annotation, error) {
	a, err := st.AnnotationPut(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("annotate step %q: %w", p.StepID, err)
	}
	return a, nil
}

// ApplyAnnotations overlays the stored annotation rows on the annotations
// the steps were committed with, in place: what a reader (the dashboard, the
// HTTP API) should show.
func ApplyAnnotations(ctx context.Context, st store.Store, steps []*stepwise.Step) error {
	if len(steps) == 0 {
		return nil
	}
	byStep := map[string]*store.Annotation{}
	for chunk := range slices.Chunk(steps, 500) {
		ids := make([]string, len(chunk))
		for i, s := range chunk {
			ids[i] = s.ID
		}
		rows, err := st.AnnotationList(ctx, &store.AnnotationListParams{StepIDs: ids})
		if err != nil {
			return fmt.Errorf("read annotations: %w", err)
		}
		for _, a := range rows {
			byStep[a.StepID] = a
		}
	}
	for _, s := range steps {
		if a := byStep[s.ID]; a != nil {
			s.Annotations = a.Overlay(s.Annotations)
		}
	}
	return nil
}
