package rules

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestDecodeStepsKeepsOrder decodes lists short and long enough to be
// shared between goroutines: the steps come back in order, and a corrupt
// body anywhere fails the whole list as corrupt.
func TestDecodeStepsKeepsOrder(t *testing.T) {
	for _, n := range []int{0, 1, decodeShare, 2*decodeShare + 3, 9 * decodeShare} {
		bodies := make([][]byte, n)
		for i := range bodies {
			b, err := (&steptype.Step{ID: fmt.Sprint("s", i), Sequence: int64(i + 1), Kind: steptype.KindUser, Status: steptype.StepCompleted,
				Content: fmt.Sprint(i)}).MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			bodies[i] = b
		}
		got, err := DecodeSteps(bodies)
		if err != nil || len(got) != n {
			t.Fatalf("%d bodies: %d steps, %v", n, len(got), err)
		}
		for i, s := range got {
			if s.Sequence != int64(i+1) || s.Content != fmt.Sprint(i) {
				t.Fatalf("%d bodies: step %d is %+v", n, i, s)
			}
		}
		if n > 2 {
			bodies[n-2] = []byte(`{"id":`)
			if _, err := DecodeSteps(bodies); !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("%d bodies, one corrupt near the end: %v, want ErrCorrupt", n, err)
			}
		}
	}
}
