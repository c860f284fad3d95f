package observe_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/observe"
)

// BenchmarkMaskerStep masks a typical model step (2 KB of text with one
// address, tool-call arguments, JSON outputs): the cost added to each
// commit when masking is on.
func BenchmarkMaskerStep(b *testing.B) {
	m := observe.NewMasker(observe.MaskConfig{})
	text := strings.Repeat("The quarterly report lists revenue per region and the open items. ", 30) + "Contact bob@example.com."
	b.ReportAllocs()
	for b.Loop() {
		s := &stepwise.Step{Content: text, Outputs: json.RawMessage(`{"rows":[{"region":"north","total":1234}],"note":"ok"}`),
			Inputs: json.RawMessage(`{"q":"revenue"}`)}
		m.Step(s)
	}
}
