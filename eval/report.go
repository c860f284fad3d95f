package eval

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/store"
)

// Report is one experiment with its dataset, items and summary: the detail
// page of the dashboard and the HTTP endpoint.
type Report struct {
	Experiment *store.Experiment
	Dataset    *store.Dataset
	Summary    *Summary
	// Items pair each dataset item with its result (nil when the item has
	// not run yet), in item order.
	Items []ReportItem
}

// ReportItem is a dataset item and its result in the experiment.
type ReportItem struct {
	Item   *store.DatasetItem    `json:"item"`
	Result *store.ExperimentItem `json:"result"`
}

// LoadReport loads an experiment by id or name. The summary is the stored
// one of a finished experiment, recomputed from the items of a running one.
func LoadReport(ctx context.Context, st store.Store, ref string) (*Report, error) {
	obs, err := observations(st)
	if err != nil {
		return nil, err
	}
	x, err := experimentByRef(ctx, obs, ref)
	if err != nil {
		return nil, err
	}
	rep := &Report{Experiment: x}
	if rep.Dataset, err = obs.DatasetGet(ctx, &store.DatasetGetParams{ID: x.DatasetID}); err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	ds, err := obs.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: x.DatasetID})
	if err != nil {
		return nil, fmt.Errorf("dataset items: %w", err)
	}
	results, err := obs.ExperimentItemList(ctx, &store.ExperimentItemListParams{ExperimentID: x.ID})
	if err != nil {
		return nil, fmt.Errorf("experiment items: %w", err)
	}
	byIndex := make(map[int64]*store.ExperimentItem, len(results))
	for _, r := range results {
		byIndex[r.Index] = r
	}
	for _, it := range ds {
		rep.Items = append(rep.Items, ReportItem{Item: it, Result: byIndex[it.Index]})
	}
	rep.Summary = Summarize(results)
	if x.Status.Terminal() && len(x.Summary) > 0 {
		var s Summary
		if err := json.Unmarshal(x.Summary, &s); err == nil {
			rep.Summary = &s
		}
	}
	return rep, nil
}
