package memory

import (
	"context"
	"maps"
	"slices"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

type datasetRec struct {
	d     store.Dataset
	items []store.DatasetItem
	seq   int64
}

type experimentRec struct {
	x     store.Experiment
	items map[int64]store.ExperimentItem
	seq   int64
}

// DatasetCreate implements store.ObservationStore.
func (m *Store) DatasetCreate(_ context.Context, p *store.DatasetCreateParams) (*store.Dataset, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	for _, rec := range d.datasets {
		if rec.d.ID == p.Dataset.ID || rec.d.Name == p.Dataset.Name {
			return nil, rules.Conflict("dataset %q (%s) already exists", p.Dataset.Name, p.Dataset.ID)
		}
	}
	rec := &datasetRec{d: *p.Dataset, seq: d.next()}
	rec.d.ItemCount, rec.d.CreatedAt = int64(len(p.Items)), rules.Now(p.Now)
	for i, it := range p.Items {
		c := *it
		c.DatasetID, c.Index, c.Metadata = rec.d.ID, int64(i), rules.Raw(it.Metadata)
		rec.items = append(rec.items, c)
	}
	d.datasets[rec.d.ID] = rec
	ds := rec.d
	return &ds, nil
}

func (d *obsData) dataset(id, name string) (*datasetRec, error) {
	return byIDOrName("dataset", d.datasets, id, name, func(r *datasetRec) string { return r.d.Name })
}

// byIDOrName finds a record by id (the map key), or without id by name.
func byIDOrName[R any](what string, recs map[string]R, id, name string, nameOf func(R) string) (R, error) {
	var zero R
	if id == "" && name == "" {
		return zero, rules.Invalid("%s id or name is required", what)
	}
	if id != "" {
		if rec, ok := recs[id]; ok {
			return rec, nil
		}
		return zero, rules.NotFound(what, id)
	}
	for _, rec := range recs {
		if nameOf(rec) == name {
			return rec, nil
		}
	}
	return zero, rules.NotFound(what, name)
}

// DatasetGet implements store.ObservationStore.
func (m *Store) DatasetGet(_ context.Context, p *store.DatasetGetParams) (*store.Dataset, error) {
	if p == nil {
		return nil, rules.Invalid("nil dataset params")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec, err := m.obs().dataset(p.ID, p.Name)
	if err != nil {
		return nil, err
	}
	ds := rec.d
	return &ds, nil
}

// DatasetList implements store.ObservationStore.
func (m *Store) DatasetList(_ context.Context, p *store.DatasetListParams) ([]*store.Dataset, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	recs := slices.Collect(maps.Values(m.obs().datasets))
	slices.SortFunc(recs, func(a, b *datasetRec) int { return int(b.seq - a.seq) })
	var out []*store.Dataset
	for _, rec := range recs {
		if p != nil && p.Limit > 0 && len(out) == p.Limit {
			break
		}
		ds := rec.d
		out = append(out, &ds)
	}
	return out, nil
}

// DatasetItemList implements store.ObservationStore.
func (m *Store) DatasetItemList(_ context.Context, p *store.DatasetItemListParams) ([]*store.DatasetItem, error) {
	if p == nil || p.DatasetID == "" {
		return nil, rules.Invalid("dataset id is required")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec, err := m.obs().dataset(p.DatasetID, "")
	if err != nil {
		return nil, err
	}
	var out []*store.DatasetItem
	for _, it := range rec.items[min(max(p.Offset, 0), int64(len(rec.items))):] {
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		c := it
		c.Metadata = rules.Raw(it.Metadata)
		out = append(out, &c)
	}
	return out, nil
}

// ExperimentCreate implements store.ObservationStore.
func (m *Store) ExperimentCreate(_ context.Context, p *store.ExperimentCreateParams) (*store.Experiment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	if _, err := d.dataset(p.Experiment.DatasetID, ""); err != nil {
		return nil, err
	}
	for _, rec := range d.experiments {
		if rec.x.ID == p.Experiment.ID || rec.x.Name == p.Experiment.Name {
			return nil, rules.Conflict("experiment %q (%s) already exists", p.Experiment.Name, p.Experiment.ID)
		}
	}
	x := cloneExperiment(p.Experiment)
	if x.Status == "" {
		x.Status = store.ExperimentRunning
	}
	now := rules.Now(p.Now)
	x.CreatedAt, x.UpdatedAt = now, now
	if x.Status.Terminal() {
		x.FinishedAt = now
	}
	d.experiments[x.ID] = &experimentRec{x: *x, items: map[int64]store.ExperimentItem{}, seq: d.next()}
	return x, nil
}

func (d *obsData) experiment(id, name string) (*experimentRec, error) {
	return byIDOrName("experiment", d.experiments, id, name, func(r *experimentRec) string { return r.x.Name })
}

// ExperimentGet implements store.ObservationStore.
func (m *Store) ExperimentGet(_ context.Context, p *store.ExperimentGetParams) (*store.Experiment, error) {
	if p == nil {
		return nil, rules.Invalid("nil experiment params")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec, err := m.obs().experiment(p.ID, p.Name)
	if err != nil {
		return nil, err
	}
	return cloneExperiment(&rec.x), nil
}

// ExperimentList implements store.ObservationStore.
func (m *Store) ExperimentList(_ context.Context, p *store.ExperimentListParams) ([]*store.Experiment, error) {
	if p == nil {
		p = &store.ExperimentListParams{}
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	recs := slices.Collect(maps.Values(m.obs().experiments))
	slices.SortFunc(recs, func(a, b *experimentRec) int { return int(b.seq - a.seq) })
	var out []*store.Experiment
	for _, rec := range recs {
		if p.DatasetID != "" && rec.x.DatasetID != p.DatasetID {
			continue
		}
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		out = append(out, cloneExperiment(&rec.x))
	}
	return out, nil
}

// ExperimentUpdate implements store.ObservationStore.
func (m *Store) ExperimentUpdate(_ context.Context, p *store.ExperimentUpdateParams) (*store.Experiment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec, err := m.obs().experiment(p.ID, "")
	if err != nil {
		return nil, err
	}
	x := cloneExperiment(&rec.x)
	now := rules.Now(p.Now)
	if p.Status != nil {
		x.Status = *p.Status
		if x.Status.Terminal() {
			x.FinishedAt = now
		}
	}
	if p.Summary != nil {
		x.Summary = rules.Raw(p.Summary)
	}
	if p.Error != nil {
		x.Error = *p.Error
	}
	x.UpdatedAt = now
	rec.x = *x
	return cloneExperiment(x), nil
}

// ExperimentItemPut implements store.ObservationStore.
func (m *Store) ExperimentItemPut(_ context.Context, p *store.ExperimentItemPutParams) (*store.ExperimentItem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec, err := m.obs().experiment(p.Item.ExperimentID, "")
	if err != nil {
		return nil, err
	}
	it := cloneItem(p.Item)
	it.UpdatedAt = rules.Now(p.Now)
	rec.items[it.Index] = *it
	return cloneItem(it), nil
}

// ExperimentItemList implements store.ObservationStore.
func (m *Store) ExperimentItemList(_ context.Context, p *store.ExperimentItemListParams) ([]*store.ExperimentItem, error) {
	if p == nil || p.ExperimentID == "" {
		return nil, rules.Invalid("experiment id is required")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec, err := m.obs().experiment(p.ExperimentID, "")
	if err != nil {
		return nil, err
	}
	out := make([]*store.ExperimentItem, 0, len(rec.items))
	for _, idx := range slices.Sorted(maps.Keys(rec.items)) {
		it := rec.items[idx]
		out = append(out, cloneItem(&it))
	}
	return out, nil
}

func cloneExperiment(x *store.Experiment) *store.Experiment {
	c := *x
	c.Config, c.Summary = rules.Raw(x.Config), rules.Raw(x.Summary)
	return &c
}

func cloneItem(it *store.ExperimentItem) *store.ExperimentItem {
	c := *it
	if it.Scores != nil {
		c.Scores = maps.Clone(it.Scores)
	}
	return &c
}
