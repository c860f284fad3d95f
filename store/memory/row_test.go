package memory

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestRowExtras checks the fields a row keeps outside itself (row.go):
// a step with nested metadata, a vector or progress, and a waiting step
// once resolved, read back whole; an entry in the extras exists for those
// rows only, is not left by a step appended again, and leaves with its
// row (truncate, session delete).
func TestRowExtras(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := New()
	defer m.Close()
	if _, err := m.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	frac := 0.5
	step := func(id string) *steptype.Step {
		return &steptype.Step{ID: id, SessionID: "s", RunID: "r", Kind: steptype.KindCustom, Status: steptype.StepCompleted,
			Metadata: map[string]any{"flat": "yes"}}
	}
	plain, nested, vector, progress := step("plain"), step("nested"), step("vector"), step("progress")
	nested.Metadata = map[string]any{"deep": map[string]any{"k": []any{1.0, "x"}}}
	vector.Vector = []float32{1, 2, 3}
	progress.Progress = &steptype.Progress{Fraction: &frac, Message: "half"}
	wait := &steptype.Step{ID: "wait", SessionID: "s", RunID: "r", Kind: steptype.KindInput, Status: steptype.StepWaiting,
		Inputs: json.RawMessage(`{"question":"ok?"}`)}
	all := []*steptype.Step{plain, nested, vector, progress, wait}
	if _, err := m.StepAppend(ctx, &store.StepAppendParams{Steps: all}); err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		m.extras.mu.Lock()
		defer m.extras.mu.Unlock()
		return len(m.extras.m)
	}
	if n := entries(); n != 3 {
		t.Fatalf("%d rows in the extras after the append, want 3 (nested metadata, vector, progress)", n)
	}
	for _, want := range all {
		got, err := m.StepGet(ctx, &store.StepGetParams{ID: want.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Metadata, want.Metadata) || !reflect.DeepEqual(got.Vector, want.Vector) ||
			!reflect.DeepEqual(got.Progress, want.Progress) || got.Status != want.Status || got.Kind != want.Kind {
			t.Errorf("step %s read back as %#v", want.ID, got)
		}
	}
	// Appended again (the same ids): the stored rows answer, the new rows
	// are dropped and leave nothing.
	if _, err := m.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{step("plain"), nested}}); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 3 {
		t.Fatalf("%d rows in the extras after appending stored steps again, want 3", n)
	}
	// Resolved, the waiting step is replaced: its new bytes are in the
	// extras, and every read sees the answer.
	if _, err := m.StepResolve(ctx, &store.StepResolveParams{ID: "wait", Status: steptype.StepCompleted, Outputs: json.RawMessage(`{"answer":"yes"}`), Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 4 {
		t.Fatalf("%d rows in the extras after a resolve, want 4", n)
	}
	got, err := m.StepGet(ctx, &store.StepGetParams{ID: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != steptype.StepCompleted || string(got.Outputs) != `{"answer":"yes"}` || got.ID != "wait" {
		t.Fatalf("resolved step read back as %#v", got)
	}
	list, err := m.StepList(ctx, &store.StepListParams{SessionID: "s", Status: steptype.StepCompleted, RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 5 {
		t.Fatalf("%d completed steps listed, want 5", len(list))
	}
	done := steptype.RunCompleted
	if _, err := m.RunUpdate(ctx, &store.RunUpdateParams{ID: "r", Status: &done}); err != nil {
		t.Fatal(err)
	}
	// Truncated from the vector step on: its row and those after leave
	// the extras.
	if _, err := m.StepTruncate(ctx, &store.StepTruncateParams{SessionID: "s", StartSeq: 3}); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 1 {
		t.Fatalf("%d rows in the extras after the truncate, want 1", n)
	}
	if err := m.SessionDelete(ctx, &store.SessionDeleteParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d rows in the extras after the session's delete, want 0", n)
	}
}
