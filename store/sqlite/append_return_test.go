package sqlite_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// TestAppendReturnsStored checks that what StepAppend returns equals what a
// read of the same step returns, both for steps returned as their placed
// copy (no decode) and for those whose wire form differs from the input
// (uncompacted or HTML-escaped raw JSON, U+2028 in raw JSON, invalid
// UTF-8, empty slices,
// non-JSON metadata, sub-microsecond durations), which must be decoded.
func TestAppendReturnsStored(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	base := func(id string) *steptype.Step {
		return &steptype.Step{ID: id, SessionID: "s1", Kind: steptype.KindTool, Status: steptype.StepCompleted,
			ToolName: "echo", Inputs: json.RawMessage(`{"n":1}`), Outputs: json.RawMessage(`1`),
			Metrics: steptype.Metrics{Duration: 1500 * time.Nanosecond, StartedAt: time.Now()}}
	}
	variants := map[string]func(*steptype.Step){
		"plain":        func(*steptype.Step) {},
		"spaces":       func(s *steptype.Step) { s.Inputs = json.RawMessage(`{ "n": 1 }`) },
		"html":         func(s *steptype.Step) { s.Outputs = json.RawMessage(`"<a&b>"`) },
		"line sep":     func(s *steptype.Step) { s.Outputs = json.RawMessage("\"a\u2028b\u2029\"") },
		"utf8 raw":     func(s *steptype.Step) { s.Outputs = json.RawMessage("\"a\xffb\"") },
		"utf8 meta":    func(s *steptype.Step) { s.Metadata = map[string]any{"k\xff": "v", "v": "\xfe"} },
		"html text":    func(s *steptype.Step) { s.Content = "<a&b>\u2028" },
		"call no args": func(s *steptype.Step) { s.ToolCalls = []steptype.ToolCall{{ID: "c", Name: "x"}} },
		"utf8":         func(s *steptype.Step) { s.Content = "bad \xff byte" },
		"empty calls":  func(s *steptype.Step) { s.ToolCalls = []steptype.ToolCall{} },
		"call spaces": func(s *steptype.Step) {
			s.ToolCalls = []steptype.ToolCall{{ID: "c", Name: "x", Arguments: json.RawMessage("{\n}")}}
		},
		"calls": func(s *steptype.Step) {
			s.ToolCalls = []steptype.ToolCall{{ID: "c", Name: "x", Arguments: json.RawMessage(`{"a":[1,2]}`)}}
		},
		"metadata":     func(s *steptype.Step) { s.Metadata = map[string]any{"k": "v", "n": 2.5} },
		"metadata int": func(s *steptype.Step) { s.Metadata = map[string]any{"n": 2} },
		"empty meta":   func(s *steptype.Step) { s.Metadata = map[string]any{} },
		"error":        func(s *steptype.Step) { s.Status = steptype.StepFailed; s.Error = &steptype.StepError{Message: "boom"} },
		"local time":   func(s *steptype.Step) { s.CreatedAt = time.Now().In(time.FixedZone("x", 3600)) },
	}
	for name, mod := range variants {
		in := base("step-" + name)
		mod(in)
		got, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		read, err := st.StepGet(ctx, &store.StepGetParams{ID: in.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[0], read) {
			t.Errorf("%s: append returned\n%#v\nread returns\n%#v", name, got[0], read)
		}
		// The returned step shares nothing with the input.
		if len(in.Inputs) > 0 && len(got[0].Inputs) > 0 && &in.Inputs[0] == &got[0].Inputs[0] {
			t.Errorf("%s: returned step aliases the input", name)
		}
		// Handed over (InPlace), a step is returned as itself, placed,
		// when it needs no decode, and reads back the same either way.
		in2 := base("inplace-" + name)
		mod(in2)
		got2, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in2}, InPlace: true})
		if err != nil {
			t.Fatalf("%s in place: %v", name, err)
		}
		read2, err := st.StepGet(ctx, &store.StepGetParams{ID: in2.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got2[0], read2) {
			t.Errorf("%s in place: append returned\n%#v\nread returns\n%#v", name, got2[0], read2)
		}
		if stable := name == "plain" || name == "calls" || name == "metadata" || name == "error" || name == "local time"; stable && got2[0] != in2 {
			t.Errorf("%s in place: a copy was returned, not the given step", name)
		}
		// An idempotent re-append returns the stored row too.
		again, err := st.StepAppend(ctx, &store.StepAppendParams{Steps: []*steptype.Step{in}})
		if err != nil || !reflect.DeepEqual(again[0], read) {
			t.Errorf("%s: re-append: %v %#v", name, err, again)
		}
	}
}
