package vecindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// naive is the reference: every cosine in float64, sorted.
func naive(q []float32, vecs map[string][]float32, k int, keep func(id string) bool) []string {
	type c struct {
		id  string
		sim float64
	}
	var cs []c
	for id, v := range vecs {
		if !keep(id) {
			continue
		}
		var d, nq, nv float64
		for i := range q {
			d += float64(q[i]) * float64(v[i])
			nq += float64(q[i]) * float64(q[i])
			nv += float64(v[i]) * float64(v[i])
		}
		cs = append(cs, c{id, d / math.Sqrt(nq*nv)})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].sim > cs[j].sim })
	var out []string
	for i := 0; i < k && i < len(cs); i++ {
		out = append(out, cs[i].id)
	}
	return out
}

func ids(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.StepID
	}
	return out
}

func TestSearchMatchesNaive(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 500, 9000} { // 9000×256 takes the parallel path
		ix := New(256)
		vecs := map[string][]float32{}
		for i := range n {
			id := fmt.Sprintf("s%05d", i)
			vecs[id] = randVec(r, 256)
			ix.Put(Entry{StepID: id, SessionID: fmt.Sprint(i % 3), Kind: steptype.KindLLM}, vecs[id])
		}
		// Delete a few, replace a few.
		for i := 0; i < n; i += 97 {
			id := fmt.Sprintf("s%05d", i)
			ix.Delete(id)
			delete(vecs, id)
		}
		for i := 1; i < n; i += 101 {
			id := fmt.Sprintf("s%05d", i)
			if _, ok := vecs[id]; ok {
				vecs[id] = randVec(r, 256)
				ix.Put(Entry{StepID: id, SessionID: fmt.Sprint(i % 3), Kind: steptype.KindLLM}, vecs[id])
			}
		}
		if ix.Len() != len(vecs) {
			t.Fatalf("n=%d: Len %d, want %d", n, ix.Len(), len(vecs))
		}
		q := randVec(r, 256)
		got := ids(ix.Search(q, 10, 0, nil))
		want := naive(q, vecs, 10, func(string) bool { return true })
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: got %v, want %v", n, got, want)
		}
		f, _ := NewFilter(&store.VectorSearchParams{SessionIDs: []string{"1"}}, nil)
		got = ids(ix.Search(q, 5, 0, f))
		want = naive(q, vecs, 5, func(id string) bool {
			var i int
			fmt.Sscanf(id, "s%d", &i)
			return i%3 == 1
		})
		if !slices.Equal(got, want) {
			t.Errorf("n=%d filtered: got %v, want %v", n, got, want)
		}
	}
}

func TestSearchMaxDistance(t *testing.T) {
	t.Parallel()
	ix := New(2)
	for i, a := range []float64{0, 30, 60, 90, 120, 180} {
		rad := a * math.Pi / 180
		ix.Put(Entry{StepID: fmt.Sprintf("d%d", i)}, []float32{float32(math.Cos(rad)), float32(math.Sin(rad))})
	}
	res := ix.Search([]float32{1, 0}, 10, 0.5, nil) // cos 60° = 0.5: distance 0.5 is kept
	if got := ids(res); !slices.Equal(got, []string{"d0", "d1", "d2"}) {
		t.Errorf("max distance 0.5: %v", got)
	}
	if res := ix.Search([]float32{1, 0}, 10, 0, nil); len(res) != 6 || math.Abs(res[5].Distance-2) > 1e-6 {
		t.Errorf("no limit: %v", res)
	}
}

func TestFilterTimeRange(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f, ok := NewFilter(&store.VectorSearchParams{After: t0, Before: t0.Add(time.Hour)}, nil)
	if !ok || f == nil {
		t.Fatal("time filter not compiled")
	}
	for _, c := range []struct {
		at   time.Time
		want bool
	}{{t0.Add(-1), false}, {t0, true}, {t0.Add(59 * time.Minute), true}, {t0.Add(time.Hour), false}} {
		if got := f.Match(&Entry{Created: c.at.UnixNano()}); got != c.want {
			t.Errorf("Match(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	if f, ok := NewFilter(&store.VectorSearchParams{}, nil); !ok || f != nil {
		t.Errorf("empty params: filter %v, %v; want nil, true", f, ok)
	}
	if _, ok := NewFilter(&store.VectorSearchParams{Agent: "a"}, nil); ok {
		t.Error("agent without sessions can match")
	}
}

func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d/dim=256/k=10", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			ix := New(256)
			for i := range n {
				ix.Put(Entry{StepID: fmt.Sprintf("s%06d", i)}, randVec(r, 256))
			}
			q := randVec(r, 256)
			b.ResetTimer()
			for b.Loop() {
				ix.Search(q, 10, 0, nil)
			}
		})
	}
}
