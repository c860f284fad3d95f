package rules

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// outlineSamples are steps exercising every member the outline treats
// specially: escaped and unicode strings, tool calls with and without
// arguments, kept and digested payloads, dropped members.
func outlineSamples() []*steptype.Step {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	m := steptype.Metrics{StartedAt: at, FinishedAt: at.Add(time.Second), Duration: time.Second, InputTokens: 10, OutputTokens: 3, Cost: 0.25, Model: "m"}
	return []*steptype.Step{
		{ID: "u", SessionID: "s", RunID: "r", Sequence: 1, Kind: steptype.KindUser, Name: "user", Status: steptype.StepCompleted, Role: steptype.RoleUser, Content: "hello", CreatedAt: at},
		{ID: "l", SessionID: "s", RunID: "r", Sequence: 2, ParentID: "u", Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted, Content: "quote \" backslash \\ <tag> & é 😀 \n\t", Reasoning: "think",
			ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"a \"b\"","n":[1,{"x":"]}"}]}`)}, {ID: "c2", Name: "noargs"}}, Metrics: m, Fingerprint: "fp", CreatedAt: at},
		{ID: "t", SessionID: "s", RunID: "r", Sequence: 3, Kind: steptype.KindTool, Name: "tools", Status: steptype.StepFailed, ToolName: "search", ToolCallID: "c1",
			Inputs: json.RawMessage(`{"q":"a"}`), Outputs: json.RawMessage(`{"result":"` + strings.Repeat("x", 3000) + `"}`), Error: &steptype.StepError{Message: "boom", Code: "timeout"}, CreatedAt: at},
		{ID: "i", SessionID: "s", RunID: "r", Sequence: 4, Kind: steptype.KindInput, Status: steptype.StepCompleted, Inputs: json.RawMessage(`{"approval":{"id":"c","name":"pay","arguments":{}}}`), Outputs: json.RawMessage(`{"approved":false}`), CreatedAt: at},
		{ID: "d", SessionID: "s", RunID: "r", Sequence: 5, Kind: steptype.KindDecision, Name: "route", Status: steptype.StepCompleted, Outputs: json.RawMessage(`{"choice":"left"}`),
			StatePatch: json.RawMessage(`{"a":1}`), Metadata: map[string]any{"k": []any{"v", 1.0}}, Vector: []float32{1, 2}, Embedder: "e",
			Annotations: steptype.Annotations{State: "routing", Action: "go"}, Progress: &steptype.Progress{Message: "half"}, CreatedAt: at},
		{ID: "e", SessionID: "s", Sequence: 6, Kind: steptype.KindError, Status: steptype.StepFailed, Content: "", Error: &steptype.StepError{Message: "x", Class: steptype.ErrorPermanent}, CreatedAt: at},
	}
}

func TestDecodeOutlineEqualsOutlineOfDecode(t *testing.T) {
	for _, s := range outlineSamples() {
		b, err := EncodeStep(s)
		if err != nil {
			t.Fatal(err)
		}
		full, err := DecodeStep(b)
		if err != nil {
			t.Fatal(err)
		}
		want := OutlineOf(full)
		got, err := DecodeOutline(b)
		if err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", s.ID, got, want)
		}
		if want.Content != "" && (want.Content == full.Content || len(want.Content) > 20) {
			t.Errorf("%s: content %q is not a digest", s.ID, want.Content)
		}
		if want.StatePatch != nil || want.Metadata != nil || want.Vector != nil {
			t.Errorf("%s: dropped members kept: %+v", s.ID, want)
		}
	}
}

// TestOutlineDigestsSeparate: equal values have equal digests, different
// values (random, seed logged) different ones.
func TestOutlineDigestsSeparate(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	seen := map[string]string{}
	for range 2000 {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteRune(rune(" a\"\\é😀\n"[rng.IntN(7)]))
		}
		c := sb.String()
		s := &steptype.Step{ID: "x", SessionID: "s", Kind: steptype.KindLLM, Status: steptype.StepCompleted, Content: c}
		b, _ := EncodeStep(s)
		o, err := DecodeOutline(b)
		if err != nil {
			t.Fatalf("%q: %v", c, err)
		}
		if o.Content != OutlineOf(s).Content {
			t.Fatalf("%q: decoded digest %q, struct digest %q", c, o.Content, OutlineOf(s).Content)
		}
		if prev, ok := seen[o.Content]; ok && prev != c {
			t.Fatalf("%q and %q share digest %q", prev, c, o.Content)
		}
		seen[o.Content] = c
	}
}

func TestDecodeOutlineRejectsCorrupt(t *testing.T) {
	for _, b := range []string{``, `[]`, `{"id":"a"`, `{"id":"a",}`, `{"content":1,"kind":"llm","status":"completed"}`, `{"id":"a"} x`, `{"a":"\"}`, `{"a":tru}`} {
		if _, err := DecodeOutline([]byte(b)); err == nil {
			t.Errorf("%s: no error", b)
		}
	}
}

func FuzzDecodeOutline(f *testing.F) {
	for _, s := range outlineSamples() {
		b, _ := EncodeStep(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		full, err := DecodeStep(b)
		if err != nil {
			return
		}
		// Only bodies the encoder could have written.
		canon, err := EncodeStep(full)
		if err != nil || string(canon) != string(b) {
			return
		}
		got, err := DecodeOutline(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := OutlineOf(full); !reflect.DeepEqual(got, want) {
			t.Fatalf("\n got %+v\nwant %+v", got, want)
		}
	})
}

func BenchmarkDecodeStep(b *testing.B) {
	body, _ := EncodeStep(outlineSamples()[2])
	for b.Loop() {
		if _, err := DecodeStep(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeOutline(b *testing.B) {
	body, _ := EncodeStep(outlineSamples()[2])
	for b.Loop() {
		if _, err := DecodeOutline(body); err != nil {
			b.Fatal(err)
		}
	}
}
