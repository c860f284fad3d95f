package loadgen

import (
	"context"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
)

// The load model's deltas are stamps ("t<unix nanoseconds>|"), each kept
// intact after the model went on (a subscriber may hold them), the final
// content all of them; a call allocates the same few objects however many
// deltas it streams (not a string per delta: the model is the load
// generator, its cost is not what the benchmark measures).
func TestLoadModelDeltas(t *testing.T) {
	generate := func(m *loadModel) (deltas []string, final *llm.Response) {
		for r, err := range m.Generate(context.Background(), &llm.Request{}) {
			if err != nil {
				t.Fatal(err)
			}
			if r.Partial {
				deltas = append(deltas, r.Content)
			} else {
				final = r
			}
		}
		return deltas, final
	}
	m := &loadModel{turns: 2, deltas: 40, latency: 2}
	deltas, final := generate(m)
	if len(deltas) != 40 || final == nil || final.Content != strings.Join(deltas, "") || final.FinishReason != "tool_calls" {
		t.Fatalf("%d deltas %q, final %+v", len(deltas), deltas, final)
	}
	for i, d := range deltas {
		if len(d) != 21 || d[0] != 't' || d[20] != '|' || (i > 0 && d < deltas[i-1]) {
			t.Fatalf("delta %d %q after %q", i, d, deltas[max(i-1, 0)])
		}
	}
	count := func(n int) float64 {
		m := &loadModel{turns: 2, deltas: n, latency: 2}
		return testing.AllocsPerRun(20, func() {
			for range m.Generate(context.Background(), &llm.Request{}) {
			}
		})
	}
	if few, many := count(2), count(50); many > few {
		t.Errorf("%.0f allocations for a call of 50 deltas, %.0f for 2: want no more per delta", many, few)
	}
}
