package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/store"
)

// datasets copies the datasets and experiments, which belong to no
// session, after the sessions.
func (c *copier) datasets(ctx context.Context) error {
	src, dst := c.from, c.to
	sets, err := src.DatasetList(ctx, &store.DatasetListParams{})
	if err != nil {
		return fmt.Errorf("read datasets: %w", err)
	}
	for i := len(sets) - 1; i >= 0; i-- { // oldest first
		d := sets[i]
		old, err := dst.DatasetGet(ctx, &store.DatasetGetParams{ID: d.ID})
		if err == nil {
			if !sameJSON(old, d) {
				return conflict("dataset", d.ID)
			}
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("read destination dataset %s: %w", d.ID, err)
		}
		var items []*store.DatasetItem
		for {
			page, err := src.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: d.ID, Offset: int64(len(items)), Limit: 1000})
			if err != nil {
				return fmt.Errorf("read items of dataset %s: %w", d.ID, err)
			}
			items = append(items, page...)
			if len(page) < 1000 {
				break
			}
		}
		nd := *d
		if _, err := dst.DatasetCreate(ctx, &store.DatasetCreateParams{Dataset: &nd, Items: items, Now: d.CreatedAt}); err != nil {
			return fmt.Errorf("write dataset %s: %w", d.ID, err)
		}
		c.rep.Datasets++
	}
	exps, err := src.ExperimentList(ctx, &store.ExperimentListParams{})
	if err != nil {
		return fmt.Errorf("read experiments: %w", err)
	}
	for i := len(exps) - 1; i >= 0; i-- {
		if err := c.experiment(ctx, exps[i]); err != nil {
			return err
		}
	}
	return nil
}

// experiment copies one experiment and its item results: created running
// at its creation time, finished at its finish time, updated last at its
// update time.
func (c *copier) experiment(ctx context.Context, x *store.Experiment) error {
	src, dst := c.from, c.to
	old, err := dst.ExperimentGet(ctx, &store.ExperimentGetParams{ID: x.ID})
	if err == nil {
		if !sameJSON(old, x) {
			return conflict("experiment", x.ID)
		}
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read destination experiment %s: %w", x.ID, err)
	}
	nx := *x
	nx.Status, nx.Summary, nx.Error = store.ExperimentRunning, nil, ""
	if _, err := dst.ExperimentCreate(ctx, &store.ExperimentCreateParams{Experiment: &nx, Now: x.CreatedAt}); err != nil {
		return fmt.Errorf("write experiment %s: %w", x.ID, err)
	}
	items, err := src.ExperimentItemList(ctx, &store.ExperimentItemListParams{ExperimentID: x.ID})
	if err != nil {
		return fmt.Errorf("read items of experiment %s: %w", x.ID, err)
	}
	for _, it := range items {
		ni := *it
		if _, err := dst.ExperimentItemPut(ctx, &store.ExperimentItemPutParams{Item: &ni, Now: it.UpdatedAt}); err != nil {
			return fmt.Errorf("write item %d of experiment %s: %w", it.Index, x.ID, err)
		}
	}
	if x.Status.Terminal() {
		if _, err := dst.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: x.ID, Status: &x.Status, Summary: x.Summary,
			Error: &x.Error, Now: x.FinishedAt}); err != nil {
			return fmt.Errorf("write experiment %s: %w", x.ID, err)
		}
	}
	if !x.Status.Terminal() {
		if _, err := dst.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: x.ID, Summary: x.Summary,
			Error: &x.Error, Now: x.UpdatedAt}); err != nil {
			return fmt.Errorf("write experiment %s: %w", x.ID, err)
		}
	} else if !x.UpdatedAt.Equal(x.FinishedAt) {
		// Touch it last at its update time, leaving its finish time.
		if _, err := dst.ExperimentUpdate(ctx, &store.ExperimentUpdateParams{ID: x.ID, Now: x.UpdatedAt}); err != nil {
			return fmt.Errorf("write experiment %s: %w", x.ID, err)
		}
	}
	c.rep.Experiments++
	return nil
}
