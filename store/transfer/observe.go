package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/store"
)

// observation copies a session's evals, annotations, attachments (with
// their blobs) and step events through the ObservationStore API, with
// their ids and timestamps. Rows the destination holds already are
// compared, not written again.
func (c *copier) observation(ctx context.Context, sessionID string, h *hasher) error {
	src, dst := c.from, c.to
	evals, err := src.EvalList(ctx, &store.EvalListParams{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("read evals: %w", err)
	}
	for _, e := range evals {
		if err := c.eval(ctx, e); err != nil {
			return err
		}
	}
	h.evals(evals)

	anns, err := src.AnnotationList(ctx, &store.AnnotationListParams{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("read annotations: %w", err)
	}
	have, err := dst.AnnotationList(ctx, &store.AnnotationListParams{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("read destination annotations: %w", err)
	}
	byStep := map[string]*store.Annotation{}
	for _, a := range have {
		byStep[a.StepID] = a
	}
	for _, a := range anns {
		if old := byStep[a.StepID]; old != nil {
			if !sameJSON(old, a) {
				return conflict("annotation of step", a.StepID)
			}
			continue
		}
		n := a.Annotations
		_, err := dst.AnnotationPut(ctx, &store.AnnotationPutParams{StepID: a.StepID, State: &n.State, Goal: &n.Goal,
			Action: &n.Action, StateSummary: &n.StateSummary, GoalSummary: &n.GoalSummary, ActionSummary: &n.ActionSummary, Now: a.UpdatedAt})
		if err != nil {
			return fmt.Errorf("write annotation of step %s: %w", a.StepID, err)
		}
	}
	h.annotations(anns)

	atts, err := src.AttachmentList(ctx, &store.AttachmentListParams{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("read attachments: %w", err)
	}
	for _, a := range atts {
		old, err := dst.AttachmentGet(ctx, &store.AttachmentGetParams{ID: a.ID})
		if err == nil {
			if !sameJSON(old, a) {
				return conflict("attachment", a.ID)
			}
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("read destination attachment %s: %w", a.ID, err)
		}
		if err := c.blob(ctx, a.BlobHash); err != nil {
			return err
		}
		add := *a
		if _, err := dst.AttachmentAdd(ctx, &store.AttachmentAddParams{Attachment: &add, Now: a.CreatedAt}); err != nil {
			return fmt.Errorf("write attachment %s: %w", a.ID, err)
		}
	}
	h.attachments(atts)
	return c.events(ctx, sessionID, h)
}

// eval copies one eval: put at its creation time, then again at its
// update time, so both timestamps are kept.
func (c *copier) eval(ctx context.Context, e *store.Eval) error {
	old, err := c.to.EvalGet(ctx, &store.EvalGetParams{ID: e.ID})
	if err == nil {
		if !sameJSON(old, e) {
			return conflict("eval", e.ID)
		}
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read destination eval %s: %w", e.ID, err)
	}
	put := *e
	if _, err := c.to.EvalPut(ctx, &store.EvalPutParams{Eval: &put, Now: e.CreatedAt}); err != nil {
		return fmt.Errorf("write eval %s: %w", e.ID, err)
	}
	if !e.UpdatedAt.Equal(e.CreatedAt) {
		put = *e
		if _, err := c.to.EvalPut(ctx, &store.EvalPutParams{Eval: &put, Now: e.UpdatedAt}); err != nil {
			return fmt.Errorf("write eval %s: %w", e.ID, err)
		}
	}
	return nil
}

// blob copies one blob unless the destination holds it (blobs are
// addressed by content, so holding it means holding the same bytes).
func (c *copier) blob(ctx context.Context, hash string) error {
	b, err := c.from.BlobGet(ctx, &store.BlobGetParams{Hash: hash})
	if err != nil {
		return fmt.Errorf("read blob %s: %w", hash, err)
	}
	if _, err := c.to.BlobPut(ctx, &store.BlobPutParams{Data: b.Data, ContentType: b.ContentType, Now: b.CreatedAt}); err != nil {
		return fmt.Errorf("write blob %s: %w", hash, err)
	}
	return nil
}

// events copies the step events of a session in the order they were
// appended, so each gets the same index inside its step; a payload stored
// out of line is read from its blob and stored out of line again.
func (c *copier) events(ctx context.Context, sessionID string, h *hasher) error {
	evs, err := c.from.StepEventList(ctx, &store.StepEventListParams{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("read step events: %w", err)
	}
	have, err := c.to.StepEventList(ctx, &store.StepEventListParams{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("read destination step events: %w", err)
	}
	byID := map[string]*store.StepEvent{}
	for _, e := range have {
		byID[e.ID] = e
	}
	var batch []*store.StepEvent
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := c.to.StepEventAppend(ctx, &store.StepEventAppendParams{Events: batch, Now: batch[0].CreatedAt})
		batch = batch[:0]
		if err != nil {
			return fmt.Errorf("write step events: %w", err)
		}
		return nil
	}
	for _, e := range evs {
		if old := byID[e.ID]; old != nil {
			if !sameJSON(old, e) {
				return conflict("step event", e.ID)
			}
			continue
		}
		in := *e
		if e.BlobHash != "" {
			b, err := c.from.BlobGet(ctx, &store.BlobGetParams{Hash: e.BlobHash})
			if err != nil {
				return fmt.Errorf("read blob %s of step event %s: %w", e.BlobHash, e.ID, err)
			}
			in.Payload, in.BlobHash = b.Data, ""
		}
		if len(batch) > 0 && (!batch[0].CreatedAt.Equal(e.CreatedAt) || len(batch) == 200) {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, &in)
	}
	if err := flush(); err != nil {
		return err
	}
	h.events(evs)
	return nil
}

func conflict(what, id string) error {
	return fmt.Errorf("%w: the destination holds %s %q with different data", store.ErrConflict, what, id)
}
