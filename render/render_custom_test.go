package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/render"
	"github.com/stepwise-run/stepwise/steptype"
)

// A custom step renders what it did — action, inputs, outputs, state
// update — and never an empty body.
func TestRenderCustomStep(t *testing.T) {
	s := &steptype.Step{Sequence: 4, Kind: steptype.KindCustom, Name: "validate", Status: steptype.StepCompleted,
		Inputs: json.RawMessage(`{"doc":"a.txt"}`), StatePatch: json.RawMessage(`{"valid":true}`)}
	s.Annotations.Action = "checked the document"
	got := render.Steps([]*steptype.Step{s})
	for _, want := range []string{"Step: validate", "Action: checked the document", `Inputs: {"doc":"a.txt"}`, `State Update: {"valid":true}`} {
		if !strings.Contains(got, want) {
			t.Errorf("render lacks %q:\n%s", want, got)
		}
	}
	bare := render.Steps([]*steptype.Step{{Sequence: 5, Kind: steptype.KindCustom, Name: "noop"}})
	if !strings.HasSuffix(bare, "Step: noop\n(no output)") {
		t.Errorf("bare custom step:\n%s", bare)
	}
}
