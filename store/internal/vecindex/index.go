package vecindex

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/stepwise-run/stepwise/steptype"
)

// Entry is what the index keeps of one step besides its vector: the fields
// the filters read. All of them are immutable in a stored step.
type Entry struct {
	StepID    string
	SessionID string
	RunID     string
	Kind      steptype.Kind
	Created   int64 // the step's CreatedAt, unix nanoseconds
}

// Result is one hit of Index.Search.
type Result struct {
	StepID   string
	Distance float64
}

// Index is an exact cosine index of the vectors of one embedder: entries
// and their L2-normalized vectors in one contiguous slab, searched by a
// brute-force scan that keeps the top k in a heap. It is safe for
// concurrent use.
type Index struct {
	dim int

	mu   sync.RWMutex
	meta []Entry
	data []float32 // vector of meta[i] at data[i*dim:(i+1)*dim]
	pos  map[string]int
}

// New returns an empty index of dimension dim.
func New(dim int) *Index {
	return &Index{dim: dim, pos: make(map[string]int)}
}

// Dim returns the dimension of the index.
func (ix *Index) Dim() int { return ix.dim }

// Len returns how many vectors the index holds.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.meta)
}

// Put adds or replaces the vector of e.StepID. v must have the index's
// dimension and a non-zero norm (see CheckVector); it is copied.
func (ix *Index) Put(e Entry, v []float32) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.putLocked(e, v)
}

// PutAll adds or replaces many vectors under one lock.
func (ix *Index) PutAll(es []Entry, vs [][]float32) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.data = slices.Grow(ix.data, len(es)*ix.dim)
	for i := range es {
		ix.putLocked(es[i], vs[i])
	}
}

func (ix *Index) putLocked(e Entry, v []float32) {
	i, ok := ix.pos[e.StepID]
	if !ok {
		i = len(ix.meta)
		ix.meta = append(ix.meta, e)
		ix.data = slices.Grow(ix.data, ix.dim)[:len(ix.data)+ix.dim]
		ix.pos[e.StepID] = i
	}
	ix.meta[i] = e
	normalize(ix.data[i*ix.dim:(i+1)*ix.dim], v)
}

// Delete removes the vectors of the given steps; unknown ids are ignored.
func (ix *Index) Delete(ids ...string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, id := range ids {
		i, ok := ix.pos[id]
		if !ok {
			continue
		}
		last := len(ix.meta) - 1
		if i != last {
			ix.meta[i] = ix.meta[last]
			copy(ix.data[i*ix.dim:(i+1)*ix.dim], ix.data[last*ix.dim:])
			ix.pos[ix.meta[i].StepID] = i
		}
		ix.meta = ix.meta[:last]
		ix.data = ix.data[:last*ix.dim]
		delete(ix.pos, id)
	}
}

// Has reports whether the index holds a vector for the step.
func (ix *Index) Has(id string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.pos[id]
	return ok
}

// normalize writes v / |v| into dst.
func normalize(dst, v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		dst[i] = float32(float64(x) * inv)
	}
}

// parallelWork is the number of multiply-adds from which a search is split
// across CPUs.
const parallelWork = 1 << 21

// Search returns the k entries most similar to q (any norm, the index's
// dimension) that f accepts (nil accepts all), best first; ties go to the
// smaller step id, so results do not depend on insertion order. maxDist > 0
// drops hits whose cosine distance exceeds it.
func (ix *Index) Search(q []float32, k int, maxDist float64, f *Filter) []Result {
	qn := make([]float32, len(q))
	normalize(qn, q)
	minSim := float32(math.Inf(-1))
	if maxDist > 0 {
		// A little slack for float32 rounding; the exact test is below.
		minSim = float32(1-maxDist) - 1e-6
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := len(ix.meta)
	parts := 1
	if w := n * ix.dim; w >= parallelWork {
		parts = min(runtime.GOMAXPROCS(0), w/(parallelWork/2), 16)
	}
	var h topK
	if parts <= 1 {
		h = ix.scan(qn, k, minSim, f, 0, n)
	} else {
		heaps := make([]topK, parts)
		var wg sync.WaitGroup
		for p := range parts {
			lo, hi := n*p/parts, n*(p+1)/parts
			wg.Go(func() { heaps[p] = ix.scan(qn, k, minSim, f, lo, hi) })
		}
		wg.Wait()
		h = topK{k: k}
		for _, part := range heaps {
			for _, c := range part.items {
				h.offer(c.sim, c.i, ix.meta)
			}
		}
	}
	items := h.items
	slices.SortFunc(items, func(a, b cand) int { return h.cmp(a, b, ix.meta) })
	out := make([]Result, 0, len(items))
	for _, c := range items {
		d := 1 - float64(c.sim)
		if d < 0 {
			d = 0
		}
		if maxDist > 0 && d > maxDist {
			continue
		}
		out = append(out, Result{StepID: ix.meta[c.i].StepID, Distance: d})
	}
	return out
}

// scan searches entries [lo, hi).
func (ix *Index) scan(q []float32, k int, minSim float32, f *Filter, lo, hi int) topK {
	h := topK{k: k, items: make([]cand, 0, k)}
	d := ix.dim
	for i := lo; i < hi; i++ {
		if f != nil && !f.Match(&ix.meta[i]) {
			continue
		}
		s := dot(q, ix.data[i*d:(i+1)*d])
		if s < minSim {
			continue
		}
		h.offer(s, i, ix.meta)
	}
	return h
}

// dot is the inner product of two vectors of one length, with eight
// independent accumulators and re-sliced blocks so the compiler drops the
// bounds checks.
func dot(a, b []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for len(a) >= 8 && len(b) >= 8 {
		x, y := a[:8:8], b[:8:8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
		a, b = a[8:], b[8:]
	}
	for i := range min(len(a), len(b)) {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// cand is a candidate: a similarity and an entry position.
type cand struct {
	sim float32
	i   int
}

// topK keeps the k best candidates in a min-heap whose root is the worst.
type topK struct {
	k     int
	items []cand
}

// cmp orders candidates best first: higher similarity, then smaller id.
func (h *topK) cmp(a, b cand, meta []Entry) int {
	switch {
	case a.sim > b.sim:
		return -1
	case a.sim < b.sim:
		return 1
	}
	return strings.Compare(meta[a.i].StepID, meta[b.i].StepID)
}

// worse reports whether a ranks after b.
func (h *topK) worse(a, b cand, meta []Entry) bool { return h.cmp(a, b, meta) > 0 }

func (h *topK) offer(sim float32, i int, meta []Entry) {
	c := cand{sim, i}
	if len(h.items) < h.k {
		h.items = append(h.items, c)
		h.up(len(h.items)-1, meta)
		return
	}
	if !h.worse(h.items[0], c, meta) {
		return
	}
	h.items[0] = c
	h.down(0, meta)
}

func (h *topK) up(j int, meta []Entry) {
	for j > 0 {
		p := (j - 1) / 2
		if !h.worse(h.items[j], h.items[p], meta) {
			return
		}
		h.items[j], h.items[p] = h.items[p], h.items[j]
		j = p
	}
}

func (h *topK) down(j int, meta []Entry) {
	n := len(h.items)
	for {
		l := 2*j + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && h.worse(h.items[r], h.items[l], meta) {
			w = r
		}
		if !h.worse(h.items[w], h.items[j], meta) {
			return
		}
		h.items[j], h.items[w] = h.items[w], h.items[j]
		j = w
	}
}

// IDs returns the step ids for which keep returns true.
func (ix *Index) IDs(keep func(id string) bool) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []string
	for i := range ix.meta {
		if id := ix.meta[i].StepID; keep(id) {
			out = append(out, id)
		}
	}
	return out
}
