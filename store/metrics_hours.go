package store

import (
	"encoding/binary"
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

// AddPackedLatencies records the packed run durations of one hour in
// bucket i (as milliseconds, as AddLatency), for drivers that read the
// hour table.
func (b *MetricsBuilder) AddPackedLatencies(i int, key string, packed []byte) {
	s, ok := b.at(i, key)
	if !ok {
		return
	}
	for j := 0; j+8 <= len(packed); j += 8 {
		s.latencies[i] = append(s.latencies[i], float64(int64(binary.LittleEndian.Uint64(packed[j:])))/1e6)
	}
}
