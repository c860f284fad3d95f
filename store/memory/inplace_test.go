package memory_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// TestAppendInPlaceCopiesOnce checks that with InPlace a new step is
// returned as the given one, placed, so the store copies it once (for
// itself) instead of twice, and that the copy it keeps is its own; a step
// already stored, or without InPlace, is returned as a copy.
func TestAppendInPlaceCopiesOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := memory.New()
	defer st.Close()
	must(st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}))
	step := func(id string) *steptype.Step {
		return &steptype.Step{ID: id, SessionID: "s1", Kind: steptype.KindTool, Status: steptype.StepCompleted,
			Inputs: json.RawMessage(`{"n":1}`), Metadata: map[string]any{"k": "v"}}
	}
	in := step("a")
	got := must(st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in, step("a"), step("b")}, InPlace: true}))
	if got[0] != in || got[0].Sequence != 1 || got[0].CreatedAt.IsZero() {
		t.Fatalf("InPlace: got %p (sequence %d), want the given step %p placed", got[0], got[0].Sequence, in)
	}
	if got[1] == got[0] || got[1].Sequence != 1 {
		t.Errorf("a second step with the same id: got %p (sequence %d), want a copy of the first", got[1], got[1].Sequence)
	}
	read := must(st.StepGet(ctx, &store.StepGetParams{ID: "a"}))
	if !reflect.DeepEqual(read, in) {
		t.Errorf("returned\n%#v\nread\n%#v", in, read)
	}
	in.Inputs[0], in.Metadata["k"] = 'X', "changed"
	if again := must(st.StepGet(ctx, &store.StepGetParams{ID: "a"})); !reflect.DeepEqual(again, read) {
		t.Errorf("the store shares memory with the handed-over step: %s %v", again.Inputs, again.Metadata)
	}
	re := step("a")
	if got := must(st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{re}, InPlace: true})); got[0] == re {
		t.Errorf("a re-append returned the given step instead of the stored row")
	}
	plain := step("c")
	if got := must(st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{plain}})); got[0] == plain || plain.Sequence != 0 {
		t.Errorf("without InPlace the given step was returned or changed")
	}
}
