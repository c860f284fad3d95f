package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// testAppendInPlace checks StepAppendParams.InPlace: what is returned
// reads back the same, whether or not the driver returned the given steps,
// and the store keeps none of the caller's memory.
func testAppendInPlace(t *testing.T, h *harness) {
	// Shapes whose stored form differs from the input (a driver normalizes
	// or decodes them) beside the plain one.
	variants := map[string]func(*steptype.Step){
		"full":         func(*steptype.Step) {},
		"spaces":       func(s *steptype.Step) { s.Inputs = json.RawMessage(`{ "n": 1 }`) },
		"html":         func(s *steptype.Step) { s.Outputs = json.RawMessage(`"<a&b>"`) },
		"metadata int": func(s *steptype.Step) { s.Metadata = map[string]any{"n": 2} },
		"local time":   func(s *steptype.Step) { s.CreatedAt = time.Now().In(time.FixedZone("x", 3600)) },
		"no time":      func(s *steptype.Step) { s.CreatedAt = time.Time{} },
		"nanoseconds":  func(s *steptype.Step) { s.Metrics.Duration = 1500 * time.Nanosecond },
	}
	h.sub(t, "AppendInPlace", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		for name, mod := range variants {
			in := fullStep("s1", "x-"+name)
			mod(in)
			got, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{in}, InPlace: true})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			read, err := st.StepGet(t.Context(), &store.StepGetParams{ID: in.ID})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, name+": returned vs read", got[0], read)
			if got[0].Sequence == 0 || got[0].CreatedAt.IsZero() {
				t.Errorf("%s: returned step not placed: sequence %d, created %v", name, got[0].Sequence, got[0].CreatedAt)
			}
			// The caller may change what it handed over and what it got
			// back: the store is not affected.
			for _, s := range []*steptype.Step{in, got[0]} {
				s.Content, s.Metadata["k"], s.ToolCalls[0].Name = "changed", "changed", "changed"
				s.ToolCalls[0].Arguments[0], s.Inputs[0], s.Vector[0] = 'X', 'X', 42
			}
			again, err := st.StepGet(t.Context(), &store.StepGetParams{ID: in.ID})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, name+": read after the caller's changes", again, read)
		}
	})
	h.sub(t, "AppendInPlaceReappend", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		stored := mustAppend(t, st, fullStep("s1", "x1"))[0]
		in := fullStep("s1", "x1")
		in.Content = "another"
		got, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{in}, InPlace: true})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "re-append returns the stored row", got[0], stored)
		got[0].Content = "changed"
		again, err := st.StepGet(t.Context(), &store.StepGetParams{ID: "x1"})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "read after changing the re-append's result", again, stored)
	})
	h.sub(t, "AppendInPlaceFailure", func(t *testing.T, st store.Store) {
		mustSession(t, st, "s1")
		in := fullStep("s1", "x1")
		in.CreatedAt = time.Time{}
		in.Sequence = 5 // not the next sequence: ErrConflict
		if _, err := st.StepAppend(t.Context(), &store.StepAppendParams{Steps: []*steptype.Step{in}, InPlace: true}); err == nil {
			t.Fatal("append at a wrong sequence succeeded")
		}
		if in.Sequence != 5 || !in.CreatedAt.IsZero() {
			t.Errorf("a failed append changed the given step: sequence %d, created %v", in.Sequence, in.CreatedAt)
		}
	})
}
