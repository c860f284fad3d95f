package postgres_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestAppendInPlaceReturnsGivenStep: with StepAppendParams.InPlace a new
// step is returned as the given step itself, placed (no copy), alone and
// in a group, and reads back the same; a step stored already under its id,
// or an append without InPlace, is returned as a copy and leaves the given
// step unchanged.
func TestAppendInPlaceReturnsGivenStep(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	ctx := t.Context()
	for _, id := range append(blockSessions(), "a", "b") {
		f.session(id)
	}
	check := func(what string, got, in *steptype.Step, wantSame bool) {
		t.Helper()
		if (got == in) != wantSame {
			t.Errorf("%s: returned the given step %v, want %v", what, got == in, wantSame)
		}
		read := f.stored(got.ID)
		if read == nil || !reflect.DeepEqual(got, read) {
			t.Errorf("%s: returned\n%#v\nread back\n%#v", what, got, read)
		}
	}

	in := userStep("a", "a-1")
	got, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in}, InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	check("lone append", got[0], in, true)
	if in.Sequence != 1 || in.CreatedAt.IsZero() {
		t.Errorf("lone append: the given step is not placed: sequence %d, created %v", in.Sequence, in.CreatedAt)
	}

	copied := userStep("a", "a-2")
	got, err = f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{copied}})
	if err != nil {
		t.Fatal(err)
	}
	check("without InPlace", got[0], copied, false)
	if copied.Sequence != 0 || !copied.CreatedAt.IsZero() {
		t.Errorf("without InPlace the given step was changed: sequence %d, created %v", copied.Sequence, copied.CreatedAt)
	}

	again := userStep("a", "a-1")
	got, err = f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{again}, InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	check("re-append", got[0], again, false)
	if again.Sequence != 0 {
		t.Errorf("re-append: the given step was changed (sequence %d)", again.Sequence)
	}

	// Queued appends committed as one group.
	g1, g2 := userStep("a", "a-3"), userStep("b", "b-1")
	cases := []*groupCase{
		{name: "group a", p: &store.StepAppendParams{Steps: []*steptype.Step{g1}, InPlace: true}},
		{name: "group b", p: &store.StepAppendParams{Steps: []*steptype.Step{g2}, InPlace: true}},
	}
	f.runGroup(cases)
	for i, g := range []*steptype.Step{g1, g2} {
		if len(cases[i].out) == 1 {
			check(cases[i].name, cases[i].out[0], g, true)
		}
	}
	if g1.Sequence != 3 || g2.Sequence != 1 {
		t.Errorf("group: sequences %d and %d, want 3 and 1", g1.Sequence, g2.Sequence)
	}
}

// An id given twice in one append is inserted once and returned twice as
// the first, in a short append (looked up among the steps before) and in
// a long one (looked up in a map).
func TestAppendSameIDTwice(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	ctx := t.Context()
	f.session("a")
	for _, n := range []int{3, 20} {
		var steps []*steptype.Step
		for i := range n {
			steps = append(steps, userStep("a", fmt.Sprintf("n%d-%d", n, i)))
		}
		steps[n-1] = userStep("a", steps[1].ID)
		steps[n-1].Content = "another"
		got, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: steps})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n || got[n-1].Sequence != got[1].Sequence || got[n-1].Content != got[1].Content {
			t.Fatalf("%d steps: the repeated id returned %+v, want the first, %+v", n, got[n-1], got[1])
		}
		if s := f.stored(steps[1].ID); s == nil || s.Sequence != got[1].Sequence || s.Content != got[1].Content {
			t.Errorf("%d steps: stored %+v, want %+v", n, s, got[1])
		}
	}
	all, err := f.st.StepList(ctx, &store.StepListParams{SessionID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2+19 {
		t.Errorf("%d steps stored, want %d", len(all), 2+19)
	}
}

// TestAppendReturnsWhatItStored: an append returns its steps as they read
// back, also when the wire format does not hold a value as given: raw JSON
// with U+2028 in a string is stored escaped (as encoding/json writes it),
// and the append returns the stored form instead of the given bytes, with
// and without InPlace; a step held verbatim is still returned itself.
func TestAppendReturnsWhatItStored(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	ctx := t.Context()
	f.session("a")
	raw := func(id string) *steptype.Step {
		st := userStep("a", id)
		st.Outputs = []byte("{\"s\":\"line\u2028sep\"}")
		st.Content = "para\u2029<&>" // a string: decodes to itself
		return st
	}
	for i, inPlace := range []bool{true, false} {
		in := raw(fmt.Sprintf("a-%d", i))
		got, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in}, InPlace: inPlace})
		if err != nil {
			t.Fatal(err)
		}
		read := f.stored(in.ID)
		if read == nil || !reflect.DeepEqual(got[0], read) {
			t.Errorf("InPlace %v: returned\n%#v\nread back\n%#v", inPlace, got[0], read)
		}
		if got[0] == in {
			t.Errorf("InPlace %v: returned the given step, whose outputs the store does not hold as given", inPlace)
		}
	}
	plain := userStep("a", "a-plain")
	plain.Content = "para\u2029<&>"
	got, err := f.st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{plain}, InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != plain || !reflect.DeepEqual(got[0], f.stored(plain.ID)) {
		t.Errorf("a step held verbatim: returned the given step %v, equal to what reads back %v", got[0] == plain,
			reflect.DeepEqual(got[0], f.stored(plain.ID)))
	}
}
