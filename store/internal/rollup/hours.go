package rollup

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// Drivers with a table of complete hours (SQLite and PostgreSQL,
// migrations 00080) answer the whole past hours of a query from it and
// the rest of the range — the partial hours at its edges, the current
// hour, hours they could not fold — from the per-minute rollups, the
// steps and the runs. The helpers below are what they share.

// HourNanos is the width of an hour in nanoseconds.
const HourNanos = int64(time.Hour)

// HourSpan returns the complete hours [h0, h1) (unix nanoseconds on
// hour boundaries) of p that lie strictly before the hour of now, and
// false when p cannot use an hour table: a split by metadata key (the
// table has no keys), minute buckets, or no complete past hour in range.
func HourSpan(p *store.MetricsParams, now time.Time) (h0, h1 int64, ok bool) {
	if p.Split != "" || p.Bucket.Duration() < time.Hour {
		return 0, 0, false
	}
	from, to, cur := p.From.UnixNano(), p.To.UnixNano(), now.UnixNano()
	h0 = from + (HourNanos-from%HourNanos)%HourNanos
	h1 = min(to-to%HourNanos, cur-cur%HourNanos)
	return h0, h1, h0 < h1
}

// Gaps returns the parts of [from, to) that are not one of the
// folded hours (sorted hour starts), merged into ranges.
func Gaps(from, to int64, folded []int64) [][2]int64 {
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

// PartsOf is Parts for the range [from, to) in unix
// nanoseconds.
func PartsOf(from, to int64) []Part {
	const m = int64(time.Minute)
	fm := from + (m-from%m)%m // first minute boundary at or after from
	tm := to - to%m           // last minute boundary at or before to
	if fm >= tm {
		return []Part{{From: from, To: to}}
	}
	var out []Part
	if from < fm {
		out = append(out, Part{From: from, To: fm})
	}
	out = append(out, Part{From: fm, To: tm, Rollup: true})
	if tm < to {
		out = append(out, Part{From: tm, To: to})
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
func (b *Builder) AddHourSums(i int, h *HourSums) {
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

// HourRows collects the rows a driver reads from its hour table
// for one query before they go to the builder (Apply): a driver that finds
// hours missing folds them and reads again, discarding the first read.
type HourRows struct {
	p         *store.MetricsParams
	b         *Builder
	sums      map[int]*HourSums
	durations map[int][][]byte
	// Folded are the folded hours read (their agent '' rows), ascending
	// when the rows come ordered by agent, then hour.
	Folded []int64
}

// NewHourRows returns an empty collection for p and b.
func NewHourRows(p *store.MetricsParams, b *Builder) *HourRows {
	return &HourRows{p: p, b: b, sums: map[int]*HourSums{}, durations: map[int][][]byte{}}
}

// Add records one row: the agent ” row of an hour marks it folded and is
// the hour's total, counted for a query of all agents; an agent's row
// counts for a query of that agent.
func (r *HourRows) Add(hour int64, agent string, steps, errors, in, out int64, cost float64,
	runs, failed int64, durations []byte, evalSum float64, evals int64) {
	if agent == "" {
		r.Folded = append(r.Folded, hour)
	}
	if agent != r.p.Agent {
		return
	}
	i, ok := r.b.Index(time.Unix(0, hour))
	if !ok {
		return
	}
	x := r.sums[i]
	if x == nil {
		x = &HourSums{}
		r.sums[i] = x
	}
	x.Steps, x.Errors, x.InputTokens, x.OutputTokens = x.Steps+steps, x.Errors+errors, x.InputTokens+in, x.OutputTokens+out
	x.AddCost(cost)
	x.Runs, x.RunsFailed = x.Runs+runs, x.RunsFailed+failed
	x.AddEvals(evalSum, evals)
	if runs != 0 {
		r.durations[i] = append(r.durations[i], durations)
	}
}

// Scan reads one row of the hour table, in the columns hour, agent,
// steps, errors, input_tokens, output_tokens, cost, runs, runs_failed,
// durations, eval_sum, evals (durations may be NULL), and records it
// (Add). sc is the row being read (*sql.Rows, pgx.Rows).
func (r *HourRows) Scan(sc interface{ Scan(dest ...any) error }) error {
	var (
		h, n, e, it, ot, runs, failed, evals int64
		c, evalSum                           float64
		agent                                string
		durations                            []byte
	)
	if err := sc.Scan(&h, &agent, &n, &e, &it, &ot, &c, &runs, &failed, &durations, &evalSum, &evals); err != nil {
		return err
	}
	r.Add(h, agent, n, e, it, ot, c, runs, failed, durations, evalSum, evals)
	return nil
}

// Apply adds the rows recorded to the builder.
func (r *HourRows) Apply() {
	for i, x := range r.sums {
		r.b.AddHourSums(i, x)
		if lists := r.durations[i]; len(lists) > 0 {
			r.b.addSortedLatencies(i, "", mergePacked(lists))
		}
	}
}

// mergePacked decodes sorted packed duration lists (nanoseconds) into one
// sorted list of milliseconds, merging them pairwise.
func mergePacked(lists [][]byte) []float64 {
	n := 0
	for _, l := range lists {
		n += len(l) / 8
	}
	a, b := make([]float64, 0, n), make([]float64, n)
	bounds := make([]int, 0, len(lists)+1)
	for _, l := range lists {
		bounds = append(bounds, len(a))
		for j := 0; j+8 <= len(l); j += 8 {
			a = append(a, float64(int64(binary.LittleEndian.Uint64(l[j:])))/1e6)
		}
	}
	bounds = append(bounds, len(a))
	for len(bounds) > 2 {
		next := bounds[:1]
		for k := 0; k+1 < len(bounds); k += 2 {
			lo, mid := bounds[k], bounds[k+1]
			hi := mid
			if k+2 < len(bounds) {
				hi = bounds[k+2]
			}
			i, j, o := lo, mid, lo
			for i < mid && j < hi {
				if a[j] < a[i] {
					b[o] = a[j]
					j++
				} else {
					b[o] = a[i]
					i++
				}
				o++
			}
			o += copy(b[o:], a[i:mid])
			copy(b[o:], a[j:hi])
			next = append(next, hi)
		}
		a, b = b[:n], a[:n]
		bounds = next
	}
	return a
}

// addSortedLatencies records sorted latencies of bucket i.
func (b *Builder) addSortedLatencies(i int, key string, sorted []float64) {
	s, ok := b.at(i, key)
	if !ok {
		return
	}
	s.latencies[i] = append(s.latencies[i], sorted...)
}

// FoldChunk bounds the hours one fold transaction computes, so a
// cold query over months holds a writer for a fraction of a second at a
// time.
const FoldChunk = 24

// FromHours is a driver's use of its hour table for p: it reads the
// table's rows of the complete hours [h0, h1) (HourSpan), folds the
// hours missing from it in chunks of FoldChunk and reads them again
// once, adds what the table holds to the builder (Apply) and returns the
// parts of [From, To) left to read from the rollups (Gaps). fold is nil
// when the driver cannot write (a read-only store); it returns false when
// it gave up without an error (PostgreSQL: the writers held the lock past
// its wait). A fold that fails while ctx is alive leaves the hours to the
// old path (a read-only replica, a full disk, another process holding the
// file); when ctx ended, its error is returned.
func FromHours(ctx context.Context, p *store.MetricsParams, h0, h1 int64,
	read func(h0, h1 int64) (*HourRows, error), fold func(hours []int64) (bool, error)) ([][2]int64, error) {
	var hr *HourRows
	for attempt := 0; ; attempt++ {
		var err error
		if hr, err = read(h0, h1); err != nil {
			return nil, err
		}
		missing := Missing(h0, h1, hr.Folded)
		if len(missing) == 0 || attempt > 0 || fold == nil {
			break
		}
		for len(missing) > 0 {
			n := min(len(missing), FoldChunk)
			done, err := fold(missing[:n])
			if err != nil && ctx.Err() != nil {
				return nil, err
			}
			if err != nil || !done {
				break
			}
			missing = missing[n:]
		}
	}
	hr.Apply()
	return Gaps(p.From.UnixNano(), p.To.UnixNano(), hr.Folded), nil
}

// Missing returns the hours of [h0, h1) not in folded (both sorted).
func Missing(h0, h1 int64, folded []int64) []int64 {
	var out []int64
	j := 0
	for h := h0; h < h1; h += HourNanos {
		for j < len(folded) && folded[j] < h {
			j++
		}
		if j < len(folded) && folded[j] == h {
			continue
		}
		out = append(out, h)
	}
	return out
}

// HourFold accumulates the rows of the hours a driver folds into its hour
// table, from the aggregates its queries return: each adds to the hour's
// total (agent "") and to its agent's row. Aggregates of hours not wanted
// are ignored.
type HourFold struct {
	want map[int64]bool
	acc  map[hourAgent]*hourFoldRow
}

type hourAgent struct {
	hour  int64
	agent string
}

type hourFoldRow struct {
	steps, errors, in, out, runs, failed, evals int64
	cost, evalSum                               KBN
	durations                                   []int64
}

// NewHourFold returns a fold of the hours (sorted) that are not folded
// (sorted): every wanted hour gets its total row, even if empty.
func NewHourFold(hours, folded []int64) *HourFold {
	f := &HourFold{want: map[int64]bool{}, acc: map[hourAgent]*hourFoldRow{}}
	for _, h := range hours {
		if _, done := slices.BinarySearch(folded, h); !done {
			f.want[h] = true
			f.row(h, "")
		}
	}
	return f
}

// Empty reports that every hour was folded already.
func (f *HourFold) Empty() bool { return len(f.want) == 0 }

func (f *HourFold) row(h int64, a string) *hourFoldRow {
	k := hourAgent{h, a}
	r := f.acc[k]
	if r == nil {
		r = &hourFoldRow{}
		f.acc[k] = r
	}
	return r
}

// each calls fn with the rows an aggregate of agent a in hour h adds to.
func (f *HourFold) each(h int64, a string, fn func(*hourFoldRow)) {
	if !f.want[h] {
		return
	}
	fn(f.row(h, ""))
	if a != "" {
		fn(f.row(h, a))
	}
}

// Steps adds the rollups of agent a in hour h.
func (f *HourFold) Steps(h int64, a string, steps, errors, in, out int64, cost float64) {
	f.each(h, a, func(r *hourFoldRow) {
		r.steps, r.errors, r.in, r.out = r.steps+steps, r.errors+errors, r.in+in, r.out+out
		r.cost.Add(cost)
	})
}

// Run adds a run of agent a finished in hour h after duration nanoseconds.
func (f *HourFold) Run(h int64, a string, failed bool, duration int64) {
	f.each(h, a, func(r *hourFoldRow) {
		r.runs++
		if failed {
			r.failed++
		}
		r.durations = append(r.durations, duration)
	})
}

// Evals adds n evals of agent a in hour h scoring sum in all.
func (f *HourFold) Evals(h int64, a string, sum float64, n int64) {
	f.each(h, a, func(r *hourFoldRow) {
		r.evalSum.Add(sum)
		r.evals += n
	})
}

// Totals sets the hour's total cost (evals false) or eval score sum
// (evals true) to SQL's own sum over all its rows, as a query of all
// agents without the table reads it, instead of a sum of the agents'.
func (f *HourFold) Totals(h int64, evals bool, sum float64) {
	if !f.want[h] {
		return
	}
	r := f.row(h, "")
	if evals {
		r.evalSum = KBN{}
		r.evalSum.Add(sum)
	} else {
		r.cost = KBN{}
		r.cost.Add(sum)
	}
}

// FoldSQL are a driver's four aggregate queries of a fold, each run with
// the range [lo, hi) of unix nanoseconds as its two arguments: the
// rollups per hour and agent (hour, agent, steps, errors, input_tokens,
// output_tokens, cost), the runs finished (hour, agent, failed,
// duration), the evals per hour and agent (hour, agent, score sum,
// count), and the totals per hour over all agents (hour, evals, sum: the
// cost with evals false, the score sum with evals true).
type FoldSQL struct{ Steps, Runs, Evals, Totals string }

// Read runs the queries of q through each, which runs one query with lo
// and hi, scans every row into dest and calls row after each, and adds
// what they return to f.
func (f *HourFold) Read(q FoldSQL, each func(query string, dest []any, row func()) error) error {
	var (
		h, n, e, it, ot int64
		cost            float64
		a               string
		failed, evals   bool
	)
	for _, x := range []struct {
		sql  string
		dest []any
		add  func()
	}{
		{q.Steps, []any{&h, &a, &n, &e, &it, &ot, &cost}, func() { f.Steps(h, a, n, e, it, ot, cost) }},
		{q.Runs, []any{&h, &a, &failed, &n}, func() { f.Run(h, a, failed, n) }},
		{q.Evals, []any{&h, &a, &cost, &n}, func() { f.Evals(h, a, cost, n) }},
		{q.Totals, []any{&h, &evals, &cost}, func() { f.Totals(h, evals, cost) }},
	} {
		if err := each(x.sql, x.dest, x.add); err != nil {
			return err
		}
	}
	return nil
}

// Rows calls insert with the values of each row to store, in the hour
// table's column order: hour, agent, steps, errors, input_tokens,
// output_tokens, cost, runs, runs_failed, durations, eval_sum, evals.
func (f *HourFold) Rows(insert func(values ...any) error) error {
	for k, r := range f.acc {
		if err := insert(k.hour, k.agent, r.steps, r.errors, r.in, r.out, r.cost.Value(), r.runs, r.failed,
			PackDurations(r.durations), r.evalSum.Value(), r.evals); err != nil {
			return err
		}
	}
	return nil
}
