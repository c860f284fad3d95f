package transfer

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// write copies one session and returns the digest of what it read from
// the source. Runs are written after every step, so an interrupted copy
// leaves no run a server on the destination could claim while its steps
// are still missing.
func (c *copier) write(ctx context.Context, s *steptype.Session) (*Digest, error) {
	h := newHasher(s)
	if err := c.to.SessionImport(ctx, &store.SessionImportParams{Session: s}); err != nil {
		return nil, fmt.Errorf("write session: %w", err)
	}
	for start := s.ForkSequence + 1; start <= s.LastSequence; {
		end := min(start+int64(c.opts.PageSize)-1, s.LastSequence)
		steps, err := c.from.StepList(ctx, &store.StepListParams{SessionID: s.ID, StartSeq: start, EndSeq: end})
		if err != nil {
			return nil, fmt.Errorf("read steps %d..%d: %w", start, end, err)
		}
		if len(steps) == 0 {
			break
		}
		if err := c.to.StepImport(ctx, &store.StepImportParams{Steps: steps}); err != nil {
			return nil, fmt.Errorf("write steps %d..%d: %w", start, end, err)
		}
		for _, st := range steps {
			if err := h.step(st); err != nil {
				return nil, err
			}
		}
		c.prog.Steps += int64(len(steps))
		c.progress(s.ID)
		start = steps[len(steps)-1].Sequence + 1
	}
	runs, err := c.from.RunList(ctx, &store.RunListParams{SessionID: s.ID})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	for _, r := range runs {
		clearLease(r)
	}
	if err := c.to.RunImport(ctx, &store.RunImportParams{Runs: runs}); err != nil {
		return nil, fmt.Errorf("write runs: %w", err)
	}
	if err := c.observation(ctx, s.ID, h); err != nil {
		return nil, err
	}
	if err := c.vectors(ctx, s.ID, h); err != nil {
		return nil, err
	}
	h.runs(runs)
	return h.sum(), nil
}

// clearLease drops a run's lease: the instance that held it does not
// serve the destination. A running run becomes claimable at once there,
// and resumes from its cursor and state.
func clearLease(r *steptype.Run) {
	r.LeaseOwner, r.LeaseExpires = "", time.Time{}
}

// vectors copies the vectors of the steps stored in a session, grouped by
// embedder.
func (c *copier) vectors(ctx context.Context, sessionID string, h *hasher) error {
	p := &store.VectorExportParams{SessionID: sessionID, Limit: 500}
	for {
		page, err := c.from.VectorExport(ctx, p)
		if err != nil {
			return fmt.Errorf("read vectors: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		by := map[string][]store.StepVector{}
		var order []string
		for _, v := range page {
			if by[v.Embedder] == nil {
				order = append(order, v.Embedder)
			}
			by[v.Embedder] = append(by[v.Embedder], store.StepVector{StepID: v.StepID, Vector: v.Vector})
			h.vector(v)
		}
		for _, emb := range order {
			if _, err := c.to.VectorUpsert(ctx, &store.VectorUpsertParams{Embedder: emb, Vectors: by[emb]}); err != nil {
				return fmt.Errorf("write vectors of %s: %w", emb, err)
			}
		}
		last := page[len(page)-1]
		p.AfterStepID, p.AfterEmbedder = last.StepID, last.Embedder
	}
}
