package steptype

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/raceflag"
)

// reflectWire is the encoding the hand-written one must reproduce byte for
// byte: encoding/json's, of the wire shape.
func reflectWire(s *Step) ([]byte, error) { return json.Marshal(s.toWire()) }

// checkSameWire fails unless MarshalJSON and AppendJSON write exactly what
// encoding/json writes for s (or fail with the same error), and the bytes
// decode to the step encoding/json's bytes decode to.
func checkSameWire(t *testing.T, s *Step) {
	t.Helper()
	want, wantErr := reflectWire(s)
	got, err := s.MarshalJSON()
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("MarshalJSON error %v, encoding/json %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON differs from encoding/json:\n got %s\nwant %s", got, want)
	}
	prefix := []byte(`[1,`)
	app, err := s.AppendJSON(bytes.Clone(prefix))
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("AppendJSON error %v, encoding/json %v", err, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !bytes.Equal(app, append(prefix, want...)) {
		t.Fatalf("AppendJSON differs from encoding/json:\n got %s\nwant %s", app, want)
	}
	vb, verbatim, err := s.AppendJSONVerbatim(bytes.Clone(prefix))
	if err != nil || !bytes.Equal(vb, app) {
		t.Fatalf("AppendJSONVerbatim wrote %s (%v), AppendJSON %s", vb, err, app)
	}
	if verbatim {
		checkVerbatim(t, s, want)
	}
	var a, b Step
	if err := a.UnmarshalJSON(got); err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalJSON(want); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a.toWire())
	jb, _ := json.Marshal(b.toWire())
	if !bytes.Equal(ja, jb) {
		t.Fatalf("decoded steps differ:\n%s\n%s", ja, jb)
	}
}

func TestAppendWireMatchesEncodingJSON(t *testing.T) {
	full := fullStep()
	frac0, frac := 0.0, 0.375
	zone := time.FixedZone("x", -(7*3600 + 30*60))
	cases := map[string]Step{
		"full":  full,
		"zero":  {},
		"plain": {ID: "a", SessionID: "s", Kind: KindLLM, Status: StepCompleted, CreatedAt: time.Unix(0, 1).UTC()},
		"escapes": {ID: "<id>&\"\\", Content: "a\x00b\x01\x1f\b\f\n\r\t\x7f<script>&amp;\u2028\u2029é漢😀", Reasoning: "bad \xff\xfe utf8 \xe2\x80",
			Name: "\u2028", ToolName: "t>", ToolCallID: "&"},
		"raw": {Inputs: json.RawMessage(" { \"a\" : [ 1 , 2.50 , \"<b>&\u2028\" ] , \"c\" : null } "), Outputs: json.RawMessage(`"x"`),
			StatePatch: json.RawMessage(`{"k":"v w"}`)},
		"raw empty non-nil": {Inputs: json.RawMessage{}, Outputs: json.RawMessage(nil)},
		"tool calls": {ToolCalls: []ToolCall{{ID: "1", Name: "n", Arguments: json.RawMessage(`{"n":1}`)}, {ID: "2", Name: "<m>"},
			{ID: "3", Arguments: json.RawMessage("[ 1,\n2 ]")}}},
		"error":                   {Error: &StepError{Message: "m<", Cause: "c", Class: "transient", Attempt: 3, Recoverable: true, Code: "http_500"}},
		"error min":               {Error: &StepError{}},
		"metrics sub-microsecond": {Metrics: Metrics{Duration: 999}},
		"metrics": {Metrics: Metrics{StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, zone), FinishedAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
			Duration: -5 * time.Microsecond, FirstTokenLatency: time.Hour, InputTokens: -1, OutputTokens: math.MaxInt64, CachedTokens: 1,
			ReasoningTokens: 2, Cost: 1e-7, Model: "m", Provider: "p", Attempt: -2, CPUTime: 1500, AllocBytes: 4096, AllocObjects: 3, OverlappingSteps: 1}},
		"costs":                 {Metrics: Metrics{Cost: math.Copysign(0, -1)}},
		"cost big":              {Metrics: Metrics{Cost: 1e21}},
		"cost just":             {Metrics: Metrics{Cost: 1e20 + 0.5, Model: "x"}},
		"cost negative":         {Metrics: Metrics{Cost: -0.000001}},
		"annotations":           {Annotations: Annotations{GoalSummary: "g", ActionSummary: "<a>"}},
		"annotations 1":         {Annotations: Annotations{State: "s"}},
		"vector":                {Vector: []float32{0, float32(math.Copysign(0, -1)), 1, 1e-7, 1e21, 3.4028235e38, -1.5e-45, 0.1}, Embedder: "e"},
		"vector empty":          {Vector: []float32{}},
		"progress nil fraction": {Progress: &Progress{Message: "half"}},
		"progress zero":         {Progress: &Progress{Fraction: &frac0}},
		"progress":              {Progress: &Progress{Fraction: &frac, Message: "m"}},
		"progress empty":        {Progress: &Progress{}},
		"metadata":              {Metadata: map[string]any{"b": []any{1, "<x>", nil}, "a": map[string]any{"z": 1.5, "y": true}}},
		"metadata empty":        {Metadata: map[string]any{}},
		"metadata strings":      {Metadata: map[string]any{"response_model": "m<1>", "finish_reason": "stop", "é": "\u2028", "": ""}},
		"metadata numbers": {Metadata: map[string]any{"i": -3, "i64": int64(math.MinInt64), "f": 1e21, "g": 1e-7, "h": math.Copysign(0, -1),
			"n": nil, "t": true, "l": []any{}, "ln": []any(nil), "m": map[string]any{}, "mn": map[string]any(nil)}},
		"metadata many keys": {Metadata: map[string]any{"k9": 1, "k1": 2, "k10": 3, "K": 4, "k": 5, "a": 6, "b": 7, "c": 8, "d": 9, "e": 10}},
		"metadata deep":      {Metadata: map[string]any{"a": []any{[]any{[]any{[]any{[]any{[]any{[]any{[]any{[]any{[]any{1}}}}}}}}}}}},
		"metadata other types": {Metadata: map[string]any{"t": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "r": json.RawMessage(` {"x" : 1}`),
			"s": []string{"<"}, "f32": float32(0.1), "u": uint8(3), "num": json.Number("12")}},
		"metadata nan":        {Metadata: map[string]any{"x": []any{math.NaN()}}},
		"replay":              {Replay: "r", Fingerprint: "f", ParentID: "p", Hop: -1, Sequence: -9},
		"time zone":           {CreatedAt: time.Date(2026, 11, 27, 8, 0, 0, 123456789, zone)},
		"time nanos trailing": {CreatedAt: time.Date(2026, 11, 27, 8, 0, 0, 120000000, time.UTC)},
		// Values encoding/json refuses: the same error.
		"bad raw":         {Outputs: json.RawMessage(`{"a":`)},
		"bad raw arg":     {ToolCalls: []ToolCall{{Arguments: json.RawMessage{}}}},
		"nan cost":        {Metrics: Metrics{Cost: math.NaN()}},
		"inf fraction":    {Progress: &Progress{Fraction: func() *float64 { f := math.Inf(-1); return &f }()}},
		"nan vector":      {Vector: []float32{float32(math.NaN())}},
		"year 10000":      {CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year 10000 in m": {Metrics: Metrics{StartedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		"zone 24h":        {CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", 24*3600))},
		"bad metadata":    {Metadata: map[string]any{"c": make(chan int)}},
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) { checkSameWire(t, &s) })
	}
}

// TestAppendWireRandomSteps compares the two encodings on generated steps
// whose strings, raw values, numbers and optional parts vary together.
func TestAppendWireRandomSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 5))
	alphabet := []string{"a", "Z", " ", "<", ">", "&", "\"", "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029",
		"😀", "\xff", "\xe2\x80", "/", "'"}
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		var b []byte
		for range r.IntN(12) {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		}
		return string(b)
	}
	raw := func() json.RawMessage {
		switch r.IntN(5) {
		case 0:
			return nil
		case 1:
			return json.RawMessage(` { "k" : ` + string(mustJSON(str())) + ` , "n" : [1, 2e3, -0.5] } `)
		case 2:
			return mustJSON(map[string]any{str(): str(), "x": r.Float64()})
		case 3:
			return json.RawMessage("\n" + string(mustJSON(str())) + "\t")
		default:
			return mustJSON(r.Int64())
		}
	}
	f64 := func() float64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
		case 2:
			return float64(r.IntN(1000))
		default:
			return r.Float64()
		}
	}
	tm := func() time.Time {
		if r.IntN(4) == 0 {
			return time.Time{}
		}
		return time.Unix(r.Int64N(1<<36)-1<<35, r.Int64N(1e9)).In(time.FixedZone("z", (r.IntN(48)-24)*1800))
	}
	for i := range 5000 {
		s := Step{ID: str(), SessionID: str(), RunID: str(), Sequence: r.Int64() - 1<<62, ParentID: str(), Hop: r.IntN(5),
			Kind: Kind(str()), Name: str(), Status: StepStatus(str()), Role: Role(str()), Content: str(), Reasoning: str(),
			ToolCallID: str(), ToolName: str(), Inputs: raw(), Outputs: raw(), StatePatch: raw(), Embedder: str(),
			Replay: str(), Fingerprint: str(), CreatedAt: tm()}
		for range r.IntN(3) {
			s.ToolCalls = append(s.ToolCalls, ToolCall{ID: str(), Name: str(), Arguments: raw()})
		}
		if r.IntN(3) == 0 {
			s.Error = &StepError{Message: str(), Cause: str(), Class: ErrorClass(str()), Attempt: r.IntN(3), Recoverable: r.IntN(2) == 0, Code: str()}
		}
		if r.IntN(2) == 0 {
			s.Metrics = Metrics{StartedAt: tm(), FinishedAt: tm(), Duration: time.Duration(r.Int64N(1e10)), FirstTokenLatency: time.Duration(r.IntN(2000)),
				InputTokens: r.Int64N(3), OutputTokens: r.Int64N(1e6), Cost: f64(), Model: str(), Provider: str(), Attempt: r.IntN(2),
				CPUTime: time.Duration(r.Int64N(1e9)), AllocBytes: r.Int64N(1e7), AllocObjects: r.Int64N(1e4), OverlappingSteps: r.IntN(3)}
		}
		if r.IntN(4) == 0 {
			s.Annotations = Annotations{State: str(), Goal: str(), ActionSummary: str()}
		}
		for range r.IntN(3) {
			s.Vector = append(s.Vector, float32(f64()))
		}
		if r.IntN(4) == 0 {
			s.Progress = &Progress{Message: str()}
			if r.IntN(2) == 0 {
				f := f64()
				s.Progress.Fraction = &f
			}
		}
		if r.IntN(4) == 0 {
			s.Metadata = map[string]any{str(): str(), "n": f64(), str(): []any{str(), r.IntN(9) - 4, nil, r.IntN(2) == 0},
				str(): map[string]any{str(): f64(), str(): int64(r.IntN(100))}}
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkSameWire(t, &s) })
	}
}

// appendWire writes the fields of stepWire and metricsWire by hand: a
// field added to either must be added there too (and to the cases above).
func TestAppendWireKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want int
	}{{reflect.TypeFor[stepWire](), 29}, {reflect.TypeFor[metricsWire](), 16}, {reflect.TypeFor[StepError](), 6},
		{reflect.TypeFor[Annotations](), 6}, {reflect.TypeFor[Progress](), 2}, {reflect.TypeFor[ToolCall](), 3}} {
		if n := c.typ.NumField(); n != c.want {
			t.Errorf("%v has %d fields, appendWire writes %d: update it", c.typ, n, c.want)
		}
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzAppendWire(f *testing.F) {
	f.Add("a", "<b>\u2028", []byte(`{"a": 1}`), 0.5, int64(3))
	f.Add("\xff", "", []byte(` [1, "x y"] `), 1e-9, int64(-1))
	f.Fuzz(func(t *testing.T, s1, s2 string, raw []byte, f float64, n int64) {
		s := Step{ID: s1, Content: s2, Outputs: raw, Sequence: n, Metrics: Metrics{Cost: f, Model: s2},
			ToolCalls: []ToolCall{{ID: s2, Arguments: raw}}, CreatedAt: time.Unix(n%(1<<36), n%1e9).UTC()}
		checkSameWire(t, &s)
	})
}

func BenchmarkStepMarshalJSON(b *testing.B) {
	s := fullStep()
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reflectWire(&s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A committed step as the event streams carry it — with an error,
// annotations, metadata of JSON's own types and compact raw JSON — is
// appended into a reused buffer without allocating (the SSE handler writes
// one per step_completed event).
func TestAppendJSONAllocatesNothing(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("allocation counts are checked without -race (scripts/test)")
	}
	s := fullStep()
	s.Vector = nil
	buf := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = s.AppendJSON(buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per step, want 0", n)
	}
}

// checkVerbatim fails unless wire, the JSON of s, decodes to s's own
// values: the same strings, raw JSON bytes and metadata, and its slices nil
// or not as s's.
func checkVerbatim(t *testing.T, s *Step, wire []byte) {
	t.Helper()
	var d Step
	if err := d.UnmarshalJSON(wire); err != nil {
		t.Fatal(err)
	}
	type texts struct {
		ID, SessionID, RunID, ParentID, Name, Content, Reasoning, ToolCallID, ToolName, Embedder, Replay, Fingerprint string
		Kind                                                                                                          Kind
		Status                                                                                                        StepStatus
		Role                                                                                                          Role
		Inputs, Outputs, StatePatch                                                                                   json.RawMessage
		ToolCalls                                                                                                     []ToolCall
		Error                                                                                                         *StepError
		Progress                                                                                                      *Progress
		Metadata                                                                                                      map[string]any
		Annotations                                                                                                   Annotations
		Model, Provider                                                                                               string
		VectorNil                                                                                                     bool
	}
	of := func(s *Step) texts {
		return texts{s.ID, s.SessionID, s.RunID, s.ParentID, s.Name, s.Content, s.Reasoning, s.ToolCallID, s.ToolName, s.Embedder, s.Replay,
			s.Fingerprint, s.Kind, s.Status, s.Role, s.Inputs, s.Outputs, s.StatePatch, s.ToolCalls, s.Error, s.Progress, s.Metadata,
			s.Annotations, s.Metrics.Model, s.Metrics.Provider, s.Vector == nil}
	}
	if got, want := of(&d), of(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("verbatim, but decodes to other values:\n got %#v\nwant %#v", got, want)
	}
}

// TestAppendJSONVerbatim: AppendJSONVerbatim says verbatim for a step whose
// values its JSON holds as they are (the engine's usual steps), and not
// for each way a value can come back otherwise; checkSameWire checks, for
// every step of the tests above, that a verbatim one decodes to its values.
func TestAppendJSONVerbatim(t *testing.T) {
	base := func() Step {
		return Step{ID: "st-1", SessionID: "s", RunID: "r", Kind: KindTool, Status: StepCompleted, Role: RoleTool,
			Content: "é <b> & \u2028 \"q\"\n", ToolName: "echo", ToolCallID: "c1", Inputs: json.RawMessage(`{"n":1}`),
			Outputs: json.RawMessage(`"é"`), ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(`[1]`)}, {ID: "d", Arguments: json.RawMessage(`{}`)}},
			Metrics:  Metrics{StartedAt: time.Unix(5, 6).UTC(), Duration: time.Millisecond, Model: "m", Provider: "p", Cost: 0.5},
			Metadata: map[string]any{"s": "v", "f": 1.5, "b": true, "n": nil, "l": []any{"x", 2.0}, "m": map[string]any{"k": "v"}},
			Error:    &StepError{Message: "m", Cause: "c", Code: "x"}, Progress: &Progress{Message: "half"}, Vector: []float32{1}}
	}
	cases := map[string]struct {
		mod  func(*Step)
		want bool
	}{
		"usual":            {func(*Step) {}, true},
		"bare":             {func(s *Step) { *s = Step{ID: "x"} }, true},
		"id utf8":          {func(s *Step) { s.ID = "a\xff" }, false},
		"content utf8":     {func(s *Step) { s.Content = "a\xe2\x80" }, false},
		"call id utf8":     {func(s *Step) { s.ToolCalls[1].ID = "\xff" }, false},
		"args nil":         {func(s *Step) { s.ToolCalls[0].Arguments = nil }, false},
		"error utf8":       {func(s *Step) { s.Error.Cause = "\xff" }, false},
		"progress utf8":    {func(s *Step) { s.Progress.Message = "\xff" }, false},
		"model utf8":       {func(s *Step) { s.Metrics.Provider = "\xff" }, false},
		"raw spaces":       {func(s *Step) { s.Inputs = json.RawMessage(`{"n": 1}`) }, false},
		"raw html":         {func(s *Step) { s.Outputs = json.RawMessage(`"<"`) }, false},
		"raw line sep":     {func(s *Step) { s.StatePatch = json.RawMessage("\"\u2028\"") }, false},
		"raw utf8":         {func(s *Step) { s.Outputs = json.RawMessage("\"\xff\"") }, false},
		"raw empty":        {func(s *Step) { s.Inputs = json.RawMessage{} }, false},
		"args spaces":      {func(s *Step) { s.ToolCalls[0].Arguments = json.RawMessage("[1,\n2]") }, false},
		"calls empty":      {func(s *Step) { s.ToolCalls = []ToolCall{} }, false},
		"vector empty":     {func(s *Step) { s.Vector = []float32{} }, false},
		"annotations":      {func(s *Step) { s.Annotations.Goal = "g" }, false},
		"metadata empty":   {func(s *Step) { s.Metadata = map[string]any{} }, false},
		"metadata int":     {func(s *Step) { s.Metadata["i"] = 3 }, false},
		"metadata int64":   {func(s *Step) { s.Metadata["l"] = []any{int64(3)} }, false},
		"metadata nil map": {func(s *Step) { s.Metadata["m"] = map[string]any(nil) }, false},
		"metadata nil l":   {func(s *Step) { s.Metadata["l"] = []any(nil) }, false},
		"metadata key":     {func(s *Step) { s.Metadata["\xff"] = "v" }, false},
		"metadata value":   {func(s *Step) { s.Metadata["m"] = map[string]any{"k": "\xfe"} }, false},
		"metadata other":   {func(s *Step) { s.Metadata["t"] = []string{"x"} }, false},
		"not encodable":    {func(s *Step) { s.Metrics.Cost = math.NaN() }, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := base()
			c.mod(&s)
			b, verbatim, err := s.AppendJSONVerbatim(nil)
			if verbatim != c.want {
				t.Errorf("verbatim %v, want %v (%s, %v)", verbatim, c.want, b, err)
			}
			if err == nil {
				checkSameWire(t, &s)
			}
		})
	}
}
