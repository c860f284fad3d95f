package rollup

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// mergePacked merges any number of sorted packed lists (empty ones, equal
// values, an odd count) into the sorted list of all their values.
func TestMergePacked(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 3, 5, 24, 25} {
		var lists [][]byte
		var want []float64
		for range k {
			d := make([]int64, r.IntN(40))
			for i := range d {
				d[i] = r.Int64N(1000) * 1e5
				want = append(want, float64(d[i])/1e6)
			}
			lists = append(lists, PackDurations(d))
		}
		slices.Sort(want)
		if got := mergePacked(lists); !slices.Equal(got, want) {
			t.Fatalf("%d lists: got %v, want %v", k, got, want)
		}
	}
}
