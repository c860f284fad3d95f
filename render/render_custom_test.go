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

// A step or tool call a worker served names the worker last; other steps
// have no such line.
func TestRenderWorkerStep(t *testing.T) {
	custom := &steptype.Step{Sequence: 2, Kind: steptype.KindCustom, Name: "transform", Status: steptype.StepCompleted,
		Content: "done", Metadata: map[string]any{"worker": "ts-worker-1", "task": "t1"}}
	tool := &steptype.Step{Sequence: 3, Kind: steptype.KindTool, ToolName: "refund", Status: steptype.StepCompleted,
		Inputs: json.RawMessage(`{"order":"A-1"}`), Content: "ok", Metadata: map[string]any{"worker": "py-worker-2"}}
	plain := &steptype.Step{Sequence: 4, Kind: steptype.KindTool, ToolName: "calc", Status: steptype.StepCompleted, Content: "42"}
	if got := render.Steps([]*steptype.Step{custom}); !strings.HasSuffix(got, "\nSummary: done\nWorker: ts-worker-1") {
		t.Errorf("custom step served by a worker:\n%s", got)
	}
	if got := render.Steps([]*steptype.Step{tool}); !strings.HasSuffix(got, "\"tool\": \"refund\"\n}\nWorker: py-worker-2") {
		t.Errorf("tool call served by a worker:\n%s", got)
	}
	if got := render.Steps([]*steptype.Step{plain}); strings.Contains(got, "Worker") {
		t.Errorf("a step no worker served names one:\n%s", got)
	}
}
