package observe

import (
	"context"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// OverlayAnnotations applies the annotation rows stored beside steps (set
// through the API, or summaries written by a Summarizer) over the steps'
// own annotations, in place, so that readers see each step's effective
// state, goal and action with their summaries. The steps must be the
// caller's copies (as store reads return them).
func OverlayAnnotations(ctx context.Context, st store.Store, steps []*stepwise.Step) error {
	if len(steps) == 0 {
		return nil
	}
	byID := make(map[string]*stepwise.Step, len(steps))
	sessions := map[string]bool{}
	for _, s := range steps {
		byID[s.ID] = s
		sessions[s.SessionID] = true
	}
	for sid := range sessions {
		var p store.AnnotationListParams
		if len(steps) <= 100 {
			for _, s := range steps {
				p.StepIDs = append(p.StepIDs, s.ID)
			}
		} else {
			p.SessionID = sid
		}
		rows, err := st.AnnotationList(ctx, &p)
		if err != nil {
			return err
		}
		for _, a := range rows {
			if s := byID[a.StepID]; s != nil {
				s.Annotations = a.Overlay(s.Annotations)
			}
		}
		if len(p.StepIDs) > 0 {
			break // one query covered every step
		}
	}
	return nil
}
