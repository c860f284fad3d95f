package store

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// Drivers with a table of complete hours (SQLite and PostgreSQL,
// migrations 00080) answer the whole past hours of a query from it and
// the rest of the range — the partial hours at its edges, the current
// hour, hours they could not fold — as before, from the per-minute
// rollups, the steps and the runs. The helpers below are what they share.

// HourNanos is the width of an hour in nanoseconds.
const HourNanos = int64(time.Hour)

// MetricsHourSpan returns the complete hours [h0, h1) (unix nanoseconds on
// hour boundaries) of p that lie strictly before the hour of now, and
// false when p cannot use an hour table: a split by metadata key (the
// table has no keys), minute buckets, or no complete past hour in range.
func MetricsHourSpan(p *MetricsParams, now time.Time) (h0, h1 int64, ok bool) {
	if p.Split != "" || p.Bucket.Duration() < time.Hour {
		return 0, 0, false
	}
	from, to, cur := p.From.UnixNano(), p.To.UnixNano(), now.UnixNano()
	h0 = from + (HourNanos-from%HourNanos)%HourNanos
	h1 = min(to-to%HourNanos, cur-cur%HourNanos)
	return h0, h1, h0 < h1
}

// MetricsGaps returns the parts of [from, to) that are not one of the
// folded hours (sorted hour starts), merged into ranges.
func MetricsGaps(from, to int64, folded []int64) [][2]int64 {
	var out [][2]int64
	at := from
	for _, h := range folded {
		if h < from || h+HourNanos > to {
			continue
		}
		if at < h {
			out = append(out, [2]int64{at, h})
		}
		at = h + HourNanos
	}
	if at < to {
		out = append(out, [2]int64{at, to})
	}
	return out
}

// MetricsPartsOf is MetricsParts for the range [from, to) in unix
// nanoseconds.
func MetricsPartsOf(from, to int64) []MetricsPart {
	const m = int64(time.Minute)
	fm := from + (m-from%m)%m // first minute boundary at or after from
	tm := to - to%m           // last minute boundary at or before to
	if fm >= tm {
		return []MetricsPart{{From: from, To: to}}
	}
	var out []MetricsPart
	if from < fm {
		out = append(out, MetricsPart{From: from, To: fm})
	}
	out = append(out, MetricsPart{From: fm, To: tm, Rollup: true})
	if tm < to {
		out = append(out, MetricsPart{From: tm, To: to})
	}
	return out
}

// PackDurations sorts the run durations (nanoseconds) and packs them as
// little-endian int64s, the encoding of the hour table's durations.
func PackDurations(d []int64) []byte {
	slices.Sort(d)
	out := make([]byte, 8*len(d))
	for i, v := range d {
		binary.LittleEndian.PutUint64(out[8*i:], uint64(v))
	}
	return out
}

// AddPackedLatencies records the packed run durations of one hour
// (sorted, as PackDurations leaves them) in bucket i, as milliseconds like
// AddLatency. Until the bucket gets a latency from AddLatency, the lists
// are merged, so its latencies stay sorted and Result need not sort them.
func (b *MetricsBuilder) AddPackedLatencies(i int, key string, packed []byte) {
	s, ok := b.at(i, key)
	if !ok {
		return
	}
	n := len(packed) / 8
	old := s.latencies[i]
	if s.unsorted == nil {
		s.unsorted = make([]bool, b.n)
	}
	if s.unsorted[i] || len(old) == 0 || old[len(old)-1] <= float64(int64(binary.LittleEndian.Uint64(packed)))/1e6 {
		for j := range n {
			old = append(old, float64(int64(binary.LittleEndian.Uint64(packed[8*j:])))/1e6)
		}
		s.latencies[i] = old
		return
	}
	out := make([]float64, 0, len(old)+n)
	j := 0
	for k := range n {
		v := float64(int64(binary.LittleEndian.Uint64(packed[8*k:]))) / 1e6
		for j < len(old) && old[j] <= v {
			out = append(out, old[j])
			j++
		}
		out = append(out, v)
	}
	s.latencies[i] = append(out, old[j:]...)
}

// HourSums accumulates the hour rows of one bucket before they are added
// to a builder: counts exactly, the cost with Neumaier's compensated
// summation, so the sum of a day's hourly sums is the correctly rounded
// sum of what they add up to, as SQLite's sum() (Kahan–Babuška–Neumaier)
// gives over the rollup rows themselves.
type HourSums struct {
	Steps, Errors, InputTokens, OutputTokens, Runs, RunsFailed, Evals int64
	cost, evalSum                                                     KBN
}

// KBN is a float sum with Neumaier's compensation (as SQLite's sum()).
type KBN struct{ sum, comp float64 }

// Add adds v.
func (k *KBN) Add(v float64) {
	t := k.sum + v
	if math.Abs(k.sum) >= math.Abs(v) {
		k.comp += (k.sum - t) + v
	} else {
		k.comp += (v - t) + k.sum
	}
	k.sum = t
}

// Value returns the sum.
func (k *KBN) Value() float64 { return k.sum + k.comp }

// AddCost adds c to the cost.
func (h *HourSums) AddCost(c float64) { h.cost.Add(c) }

// AddEvals adds n evals scoring sum in all.
func (h *HourSums) AddEvals(sum float64, n int64) {
	if n != 0 {
		h.evalSum.Add(sum)
		h.Evals += n
	}
}

// Cost returns the compensated cost.
func (h *HourSums) Cost() float64 { return h.cost.Value() }

// AddHourSums adds the accumulated hours of bucket i (no split key).
func (b *MetricsBuilder) AddHourSums(i int, h *HourSums) {
	if h.Steps != 0 {
		b.AddSteps(i, "", h.Steps, h.Errors, h.InputTokens, h.OutputTokens, h.Cost())
	}
	if h.Runs != 0 {
		b.AddRuns(i, "", h.Runs, h.RunsFailed)
	}
	if h.Evals != 0 {
		b.AddEvals(i, "", h.evalSum.Value(), h.Evals)
	}
}
