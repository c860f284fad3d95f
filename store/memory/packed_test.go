package memory

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// randomStep returns a step with every field set at random, or left zero,
// nil or empty (all three where they differ).
func randomStep(r *rand.Rand) (s *steptype.Step) {
	str := func() string {
		switch r.IntN(4) {
		case 0:
			return ""
		case 1:
			return "é\x00\"\\<>&\u2028" + string(rune(r.IntN(0x10000)))
		}
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	raw := func() json.RawMessage {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return json.RawMessage{}
		}
		return json.RawMessage(`{"k":` + string(rune('0'+r.IntN(10))) + `,"s":"` + str()[:0] + `x"}`)
	}
	tm := func() time.Time {
		switch r.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return time.Now() // a monotonic reading, local
		case 2:
			return time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9)).In(time.FixedZone("x", 3600*r.IntN(12)))
		}
		return time.Date(1+r.IntN(9999), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), 0, 0, r.IntN(1e9), time.UTC)
	}
	scalar := func() any {
		switch r.IntN(7) {
		case 0:
			return nil
		case 1:
			return str()
		case 2:
			return r.NormFloat64() * 1e6
		case 3:
			return r.IntN(2) == 0
		case 4:
			return r.IntN(1000) // not decoded JSON: normalized to float64
		case 5:
			return math.NaN()
		}
		return math.Inf(1) // encoding/json refuses it: kept as is
	}
	var meta func(depth int) map[string]any
	meta = func(depth int) map[string]any {
		if r.IntN(4) == 0 {
			return nil
		}
		m := map[string]any{}
		for range r.IntN(5) {
			k := str()
			switch {
			case depth < 2 && r.IntN(5) == 0:
				m[k] = meta(depth + 1)
			case depth < 2 && r.IntN(5) == 0:
				m[k] = []any{scalar(), meta(depth + 1), json.RawMessage(`[1]`)}
			default:
				m[k] = scalar()
			}
		}
		return m
	}
	// Half the steps have a kind and a status outside the closed sets (a
	// row keeps those in its packed bytes and its extras).
	if r.IntN(2) == 0 {
		defer func() {
			s.Kind, s.Status = steptype.Kind(str()), steptype.StepStatus(str())
		}()
	}
	s = &steptype.Step{
		ID: str(), SessionID: str(), RunID: str(), Sequence: r.Int64(), ParentID: str(), Hop: r.IntN(5),
		Kind: kinds[r.IntN(len(kinds))], Name: str(), Status: statuses[r.IntN(len(statuses))],
		Role: steptype.Role(str()), Content: str(), Reasoning: str(), ToolCallID: str(), ToolName: str(),
		Inputs: raw(), Outputs: raw(), StatePatch: raw(),
		Embedder: str(), Replay: str(), Fingerprint: str(), Metadata: meta(0), CreatedAt: tm(),
		Annotations: steptype.Annotations{State: str(), StateSummary: str(), Goal: str(), GoalSummary: str(), Action: str(), ActionSummary: str()},
		Metrics: steptype.Metrics{StartedAt: tm(), FinishedAt: tm(), Duration: time.Duration(r.Int64()),
			FirstTokenLatency: time.Duration(r.Int64N(1e12)), InputTokens: r.Int64(), OutputTokens: r.Int64N(100),
			CachedTokens: r.Int64N(100), ReasoningTokens: r.Int64N(100), Cost: r.Float64(), Model: str(), Provider: str(), Attempt: r.IntN(9)},
	}
	if r.IntN(3) > 0 {
		s.ToolCalls = make([]steptype.ToolCall, r.IntN(4))
		for i := range s.ToolCalls {
			s.ToolCalls[i] = steptype.ToolCall{ID: str(), Name: str(), Arguments: raw()}
		}
	}
	if r.IntN(2) == 0 {
		s.Error = &steptype.StepError{Message: str(), Cause: str(), Class: steptype.ErrorClass(str()), Attempt: r.IntN(5), Recoverable: r.IntN(2) == 0, Code: str()}
	}
	switch r.IntN(3) {
	case 0:
		s.Vector = []float32{}
	case 1:
		s.Vector = []float32{r.Float32(), -1, float32(math.NaN())}
	}
	if r.IntN(2) == 0 {
		f := r.Float64()
		s.Progress = &steptype.Progress{Fraction: &f, Message: str()}
	}
	return s
}

// TestPackRoundTrip checks that a packed step unpacks to what the store
// kept before packing: a normalized deep copy (rules.NormalizeStep of
// rules.CloneStep), every field, nil and empty told apart.
func TestPackRoundTrip(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	var ar arena
	for i := range 20000 {
		s := randomStep(r)
		want := rules.NormalizeStep(rules.CloneStep(s))
		before := rules.CloneStep(s)
		a := &ar
		if i%2 == 0 {
			a = nil
		}
		p := pack(s, a)
		p.normalized()
		// The bytes were sized before packing, and not grown after.
		if extra := cap(p.b) - len(p.b); extra < 0 || extra > 40 {
			t.Fatalf("step %d: %d bytes packed in %d", i, len(p.b), cap(p.b))
		}
		got := p.step()
		if !equalSteps(got, want) {
			t.Fatalf("step %d:\n got %#v\nwant %#v", i, got, want)
		}
		if !equalSteps(s, before) {
			t.Fatalf("step %d: pack changed its input", i)
		}
		row, x := newRow(s, a)
		if row.id() != want.ID || row.sessionID() != want.SessionID || row.runID() != want.RunID || p.role() != want.Role {
			t.Fatalf("step %d: row %q %q %q, role %q", i, row.id(), row.sessionID(), row.runID(), p.role())
		}
		// A row and its extras hold the same step, its kind and status.
		row.normalized()
		rp := snapOf(row, x)
		if got := rp.step(); !equalSteps(got, want) {
			t.Fatalf("step %d: row:\n got %#v\nwant %#v", i, got, want)
		}
		st := statuses[row.sc%uint8(len(statuses))]
		if row.sc == codeOther {
			st = x.status
		}
		if row.kind() != want.Kind || st != want.Status || row.waiting() != (want.Status == steptype.StepWaiting) {
			t.Fatalf("step %d: row kind %q status %q, want %q %q", i, row.kind(), st, want.Kind, want.Status)
		}
		if wantX := p.meta != nil || p.vec != nil || p.prog != nil || statusCode(want.Status) == codeOther; (x != nil) != wantX {
			t.Fatalf("step %d: extras %+v for metadata %v, vector %v, progress %v, status %q", i, x, want.Metadata, want.Vector, want.Progress, want.Status)
		}
		// What a caller does with its copy reaches neither the packed
		// step nor the input.
		scribble(got)
		if again := p.step(); !equalSteps(again, want) {
			t.Fatalf("step %d: changing an unpacked step changed the stored one:\n got %#v\nwant %#v", i, again, want)
		}
		if !equalSteps(s, before) {
			t.Fatalf("step %d: changing an unpacked step changed the input", i)
		}
		scribble(s)
		if again := p.step(); !equalSteps(again, want) {
			t.Fatalf("step %d: changing the input changed the stored step", i)
		}
	}
}

// scribble changes everything of s that can be changed in place, and
// appends to its raw JSON.
func scribble(s *steptype.Step) {
	for _, b := range []json.RawMessage{s.Inputs, s.Outputs, s.StatePatch} {
		for i := range b {
			b[i] = '#'
		}
	}
	s.Inputs = append(s.Inputs, "!!!"...)
	s.Outputs = append(s.Outputs, "???"...)
	for i := range s.ToolCalls {
		for j := range s.ToolCalls[i].Arguments {
			s.ToolCalls[i].Arguments[j] = '#'
		}
		s.ToolCalls[i].Arguments = append(s.ToolCalls[i].Arguments, "!"...)
		s.ToolCalls[i].ID = "changed"
	}
	for i := range s.Vector {
		s.Vector[i] = 42
	}
	if s.Error != nil {
		s.Error.Message = "changed"
	}
	if s.Metadata != nil {
		s.Metadata["added"] = "x"
		for _, v := range s.Metadata {
			if m, ok := v.(map[string]any); ok && m != nil {
				m["added"] = 1
			}
		}
	}
}

// equalSteps is reflect.DeepEqual with NaN equal to itself.
func equalSteps(a, b *steptype.Step) bool {
	return deepEqual(reflect.ValueOf(a), reflect.ValueOf(b))
}

func deepEqual(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return deepEqual(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !deepEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !deepEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			if !deepEqual(a.MapIndex(k), b.MapIndex(k)) {
				return false
			}
		}
		return true
	case reflect.Chan:
		return a.Pointer() == b.Pointer()
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	}
	panic("deepEqual: unexpected kind " + a.Kind().String())
}
