package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/stepwise-run/stepwise/store"
)

// ErrDifferentDatasets is returned when two experiments compared ran over
// different datasets.
var ErrDifferentDatasets = errors.New("stepwise: experiments ran over different datasets")

// Comparison sets two experiments over the same dataset side by side: the
// table behind `stepwise eval compare`, the HTTP endpoint and the dashboard
// page.
type Comparison struct {
	A, B    *store.Experiment
	Dataset *store.Dataset
	// Metrics are the aggregates: success rate, mean duration, tokens, cost,
	// then the mean score of each eval name, in name order.
	Metrics []MetricRow
	// Items pair the results of each dataset item, in item order.
	Items []ItemRow
}

// MetricRow is one aggregate of both experiments.
type MetricRow struct {
	Name string `json:"name"`
	// A and B are nil when the experiment has no value (no item has the
	// eval).
	A *float64 `json:"a"`
	B *float64 `json:"b"`
	// HigherIsBetter says how to read Delta (B − A).
	HigherIsBetter bool    `json:"higher_is_better"`
	Delta          float64 `json:"delta"`
	// Winner is "a", "b" or "" (tie or not comparable).
	Winner string `json:"winner,omitempty"`
}

// ItemRow is one dataset item in both experiments; A or B is nil when the
// experiment has no result for it.
type ItemRow struct {
	Index    int64                 `json:"index"`
	Input    string                `json:"input"`
	Expected string                `json:"expected,omitempty"`
	A        *store.ExperimentItem `json:"a"`
	B        *store.ExperimentItem `json:"b"`
	// Changed lists the eval names whose score differs between A and B.
	Changed []string `json:"changed,omitempty"`
}

// Compare loads two experiments (by id or name) and their items.
func Compare(ctx context.Context, st store.Store, a, b string) (*Comparison, error) {
	obs, err := observations(st)
	if err != nil {
		return nil, err
	}
	c := &Comparison{}
	var itemsA, itemsB []*store.ExperimentItem
	for _, side := range []struct {
		ref   string
		x     **store.Experiment
		items *[]*store.ExperimentItem
	}{{a, &c.A, &itemsA}, {b, &c.B, &itemsB}} {
		x, err := experimentByRef(ctx, obs, side.ref)
		if err != nil {
			return nil, err
		}
		items, err := obs.ExperimentItemList(ctx, &store.ExperimentItemListParams{ExperimentID: x.ID})
		if err != nil {
			return nil, fmt.Errorf("experiment %q items: %w", x.Name, err)
		}
		*side.x, *side.items = x, items
	}
	if c.A.DatasetID != c.B.DatasetID {
		return nil, fmt.Errorf("%w: %q ran over %s, %q over %s", ErrDifferentDatasets, c.A.Name, c.A.DatasetID, c.B.Name, c.B.DatasetID)
	}
	if c.Dataset, err = obs.DatasetGet(ctx, &store.DatasetGetParams{ID: c.A.DatasetID}); err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	ds, err := obs.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: c.Dataset.ID})
	if err != nil {
		return nil, fmt.Errorf("dataset items: %w", err)
	}
	c.Metrics = metrics(itemsA, itemsB)
	byIndex := func(items []*store.ExperimentItem) map[int64]*store.ExperimentItem {
		m := make(map[int64]*store.ExperimentItem, len(items))
		for _, it := range items {
			m[it.Index] = it
		}
		return m
	}
	ia, ib := byIndex(itemsA), byIndex(itemsB)
	for _, it := range ds {
		row := ItemRow{Index: it.Index, Input: it.Input, Expected: it.Expected, A: ia[it.Index], B: ib[it.Index]}
		if row.A != nil && row.B != nil {
			names := map[string]bool{}
			for n := range row.A.Scores {
				names[n] = true
			}
			for n := range row.B.Scores {
				names[n] = true
			}
			for _, n := range slices.Sorted(maps.Keys(names)) {
				va, oka := row.A.Scores[n]
				vb, okb := row.B.Scores[n]
				if oka != okb || va != vb {
					row.Changed = append(row.Changed, n)
				}
			}
		}
		c.Items = append(c.Items, row)
	}
	return c, nil
}

func experimentByRef(ctx context.Context, obs store.ObservationStore, ref string) (*store.Experiment, error) {
	x, err := obs.ExperimentGet(ctx, &store.ExperimentGetParams{ID: ref})
	if errors.Is(err, store.ErrNotFound) {
		x, err = obs.ExperimentGet(ctx, &store.ExperimentGetParams{Name: ref})
	}
	if err != nil {
		return nil, fmt.Errorf("experiment %q: %w", ref, err)
	}
	return x, nil
}

func metrics(a, b []*store.ExperimentItem) []MetricRow {
	sa, sb := Summarize(a), Summarize(b)
	rate := func(s *Summary) float64 {
		if s.Items == 0 {
			return 0
		}
		return float64(s.Completed) / float64(s.Items)
	}
	rows := []MetricRow{
		row("success_rate", ptr(rate(sa)), ptr(rate(sb)), true),
		row("mean_duration_s", ptr(sa.MeanDurationSec), ptr(sb.MeanDurationSec), false),
		row("tokens", ptr(float64(sa.InputTokens+sa.OutputTokens)), ptr(float64(sb.InputTokens+sb.OutputTokens)), false),
		row("cost_usd", ptr(sa.Cost), ptr(sb.Cost), false),
	}
	names := map[string]bool{}
	for n := range sa.Scores {
		names[n] = true
	}
	for n := range sb.Scores {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		var va, vb *float64
		if v, ok := sa.Scores[n]; ok {
			va = ptr(v)
		}
		if v, ok := sb.Scores[n]; ok {
			vb = ptr(v)
		}
		rows = append(rows, row(n, va, vb, true))
	}
	return rows
}

func row(name string, a, b *float64, higher bool) MetricRow {
	r := MetricRow{Name: name, A: a, B: b, HigherIsBetter: higher}
	if a == nil || b == nil {
		return r
	}
	r.Delta = *b - *a
	switch {
	case r.Delta == 0:
	case (r.Delta > 0) == higher:
		r.Winner = "b"
	default:
		r.Winner = "a"
	}
	return r
}

func ptr(v float64) *float64 { return &v }

// WriteTable writes the comparison as aligned text: the metrics, then the
// items whose scores or status differ.
func (c *Comparison) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "dataset %s (%d items)\n\n", c.Dataset.Name, c.Dataset.ItemCount)
	fmt.Fprintf(tw, "METRIC\tA: %s\tB: %s\tDELTA\t\n", c.A.Name, c.B.Name)
	for _, m := range c.Metrics {
		mark := ""
		if m.Winner != "" {
			mark = "better: " + strings.ToUpper(m.Winner)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, num(m.A), num(m.B), delta(m), mark)
	}
	var diff []ItemRow
	for _, it := range c.Items {
		if len(it.Changed) > 0 || status(it.A) != status(it.B) {
			diff = append(diff, it)
		}
	}
	fmt.Fprintf(tw, "\n%d of %d items differ\n", len(diff), len(c.Items))
	if len(diff) > 0 {
		fmt.Fprintf(tw, "ITEM\tINPUT\tA\tB\tCHANGED\t\n")
		for _, it := range diff {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", it.Index, oneLine(it.Input, 40), itemCell(it.A), itemCell(it.B), strings.Join(it.Changed, ","))
		}
	}
	return tw.Flush()
}

func num(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g", *v)
}

func delta(m MetricRow) string {
	if m.A == nil || m.B == nil {
		return "-"
	}
	return fmt.Sprintf("%+.4g", m.Delta)
}

func status(it *store.ExperimentItem) string {
	if it == nil {
		return "-"
	}
	return it.Status
}

func itemCell(it *store.ExperimentItem) string {
	if it == nil {
		return "-"
	}
	names := slices.Sorted(maps.Keys(it.Scores))
	parts := []string{it.Status}
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%.2g", n, it.Scores[n]))
	}
	return strings.Join(parts, " ")
}

func oneLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(s), " "), n)
}
