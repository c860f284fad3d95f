package tool

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/stepwise-run/stepwise/internal/raceflag"
)

// fullValid is the full validator's verdict, without the fast check.
func fullValid(t *testing.T, v *Validator, args string) bool {
	t.Helper()
	var inst any
	if err := json.Unmarshal(NormalizeArgs(json.RawMessage(args)), &inst); err != nil {
		return false
	}
	return v.resolved.Validate(inst) == nil
}

func mustValidator(t *testing.T, schema string) *Validator {
	t.Helper()
	v, err := NewValidator(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return v
}

// The fast check only ever says "valid" for arguments the full validator
// accepts, and does say it for the plain arguments models send.
func TestFastCheckAgreesWithValidator(t *testing.T) {
	t.Parallel()
	schemas := []string{
		`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"number"},"s":{"type":["null","string"]},"l":{"type":["null","array"],"items":{"type":"integer"}}},"required":["a","s"]}`,
		`{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"],"additionalProperties":false}},"additionalProperties":true}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"q":{"type":"string","description":"d"}},"required":["q"]}`,
		`{"type":"object"}`,
		`{}`,
	}
	args := []string{
		`{"n":1}`, `{"n":-0}`, `{"n":1.0}`, `{"n":1e2}`, `{"n":1.5}`, `{"n":"1"}`, `{"n":1,"n":"x"}`, `{"n":"x","n":1}`,
		`{"n":1,"m":2}`, `{}`, ` { "n" : 7 } `, `null`, ``, `[]`, `{"\u006e":1}`, `{"n":null}`, `{"n":true}`,
		`{"n":` + strings.Repeat("9", 400) + `}`, `{"n":1`, `{"a":1,"s":null}`, `{"a":1,"s":"x","l":[1,2]}`,
		`{"a":1,"s":"x","l":[1,"2"]}`, `{"a":1.25,"s":"é","l":null}`, `{"a":"1","s":"x"}`, `{"s":"x"}`,
		`{"o":{"x":true}}`, `{"o":{"x":1}}`, `{"o":{"x":false,"y":1}}`, `{"o":{}}`, `{"q":"hi"}`, `{"q":"a\"b"}`,
		`{"q":""}`, `{"q":1}`, `{"é":1,"q":"x"}`, `{"o":[]}`, `{"n":[{"n":1}]}`,
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	for range 3000 {
		args = append(args, randomJSON(r, 0, true))
	}
	fastYes := 0
	for _, schema := range schemas {
		v := mustValidator(t, schema)
		if v.fast == nil {
			t.Fatalf("%s: not compiled for the fast check", schema)
		}
		for _, a := range args {
			fast := v.fast.fastValid(NormalizeArgs(json.RawMessage(a)))
			if fast {
				fastYes++
			}
			if fast && !fullValid(t, v, a) {
				t.Errorf("schema %s args %s: fast check accepts what the validator refuses", schema, a)
			}
			if err := v.Validate(json.RawMessage(a)); (err == nil) != fullValid(t, v, a) {
				t.Errorf("schema %s args %s: Validate %v, full validator %v", schema, a, err, fullValid(t, v, a))
			}
		}
	}
	for _, ok := range []struct{ schema, args string }{{schemas[0], `{"n":1}`}, {schemas[0], ` { "n" : 7 } `},
		{schemas[1], `{"a":1.25,"s":"é","l":null}`}, {schemas[2], `{"o":{"x":true}}`}, {schemas[3], `{"q":"a\"b"}`}} {
		if !mustValidator(t, ok.schema).fast.fastValid([]byte(ok.args)) {
			t.Errorf("schema %s args %s: the fast check should accept", ok.schema, ok.args)
		}
	}
	if fastYes == 0 {
		t.Fatal("the fast check never accepted anything")
	}
}

// randomJSON writes a random JSON value with keys the schemas above use.
func randomJSON(r *rand.Rand, depth int, object bool) string {
	keys := []string{"n", "a", "s", "l", "o", "x", "q", "m", `\u006e`, "é"}
	if object || depth < 3 && r.IntN(4) == 0 {
		var b strings.Builder
		b.WriteString("{")
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%s\"%s\"%s:%s", pad(r), keys[r.IntN(len(keys))], pad(r), randomJSON(r, depth+1, false))
		}
		return b.String() + pad(r) + "}"
	}
	if depth < 3 && r.IntN(5) == 0 {
		parts := make([]string, r.IntN(3))
		for i := range parts {
			parts[i] = randomJSON(r, depth+1, false)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return []string{`1`, `-3`, `0`, `1.0`, `2.5`, `1e3`, `-0.0`, `"s"`, `"a\nb"`, `"ü"`, `true`, `false`, `null`, `""`}[r.IntN(14)]
}

func pad(r *rand.Rand) string { return []string{"", "", " ", "\n\t"}[r.IntN(4)] }

// Schemas with keywords outside the subset are never fast-checked.
func TestFastCheckSubset(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`{"type":"object","properties":{"u":{"type":"string","enum":["c"]}}}`,
		`{"type":"object","properties":{"c":{"type":"string","pattern":"^A$"}}}`,
		`{"type":"object","properties":{"i":{"type":"integer","minimum":1}}}`,
		`{"type":"object","additionalProperties":{"type":"integer"}}`,
		`{"type":"object","$defs":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/a"}}}`,
		`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]}`,
		`{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","minLength":2}}}}`,
	} {
		if v := mustValidator(t, schema); v.fast != nil {
			t.Errorf("%s: compiled for the fast check", schema)
		}
	}
}

// Validating the arguments of a typed tool allocates nothing when they
// are valid.
func TestValidateValidArgsAllocatesNothing(t *testing.T) {
	type args struct {
		City  string   `json:"city"`
		Days  int      `json:"days"`
		Units *string  `json:"units,omitempty"`
		Tags  []string `json:"tags,omitempty"`
	}
	s, err := jsonschema.For[args](nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(s)
	v := mustValidator(t, string(raw))
	in := json.RawMessage(`{"city":"Paris","days":3,"tags":["a","b"]}`)
	if err := v.Validate(in); err != nil {
		t.Fatal(err)
	}
	// Counted without -race only (scripts/test's allocation line): the race
	// detector changes what is allocated, and a CI run under it counted one.
	if !raceflag.Enabled {
		if n := testing.AllocsPerRun(100, func() {
			if err := v.Validate(in); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Validate allocates %.0f times per call, want 0", n)
		}
	}
	if err := v.Validate(json.RawMessage(`{"city":"Paris"}`)); err == nil || !strings.Contains(err.Error(), `"days" is required`) {
		t.Errorf("missing field: %v", err)
	}
}
