package tool_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// draft07 is the kind of schema MCP servers written with zod send.
const draft07 = `{
	"$schema": "http://json-schema.org/draft-07/schema#",
	"type": "object",
	"properties": {
		"a": {"type": "number"},
		"unit": {"type": "string", "enum": ["c", "f"]},
		"code": {"type": "string", "pattern": "^[A-Z]{3}$"},
		"extra": {"type": "object", "additionalProperties": {"type": "integer"}}
	},
	"required": ["a"],
	"additionalProperties": false
}`

func TestValidateArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  string
		field string // "" and ok: valid
		ok    bool
		want  string
	}{
		{args: `{"a":1}`, ok: true},
		{args: `{"a":1.5,"unit":"c","code":"ABC","extra":{"k":2}}`, ok: true},
		{args: `{}`, field: "a", want: "is required"},
		{args: `{"a":"1"}`, field: "a", want: `must be number, got string "1"`},
		{args: `{"a":1,"unit":"k"}`, field: "unit", want: `must be one of ["c", "f"], got string "k"`},
		{args: `{"a":1,"zzz":true}`, field: "zzz", want: "is not allowed"},
		{args: `{"a":1,"extra":{"k":"v"}}`, field: "extra.k", want: "must be integer"},
		{args: `{"a":1,"code":"abc"}`, want: "pattern"},
		{args: `true`, want: "must be a JSON object, got boolean"},
	} {
		err := tool.ValidateArgs(json.RawMessage(draft07), json.RawMessage(tc.args))
		if tc.ok {
			if err != nil {
				t.Errorf("%s: %v", tc.args, err)
			}
			continue
		}
		var ae *tool.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("%s: error %v is not an ArgumentError", tc.args, err)
			continue
		}
		if ae.Field != tc.field || !strings.Contains(ae.Problem, tc.want) {
			t.Errorf("%s: field %q problem %q; want field %q problem containing %q", tc.args, ae.Field, ae.Problem, tc.field, tc.want)
		}
		if !errors.Is(err, tool.ErrInvalidArguments) || llm.Classify(err) != steptype.ErrorPermanent {
			t.Errorf("%s: not ErrInvalidArguments / permanent", tc.args)
		}
	}
}

func TestValidateArgsBadSchema(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{"type":`, `{"$ref":"https://example.com/remote.json"}`, `[1]`} {
		err := tool.ValidateArgs(json.RawMessage(s), json.RawMessage(`{}`))
		if !errors.Is(err, tool.ErrInvalidSchema) {
			t.Errorf("schema %s: err = %v, want ErrInvalidSchema", s, err)
		}
	}
}

func TestValidatorReuse(t *testing.T) {
	t.Parallel()
	v, err := tool.NewValidator(json.RawMessage(draft07))
	if err != nil {
		t.Fatal(err)
	}
	if string(v.Schema()) != draft07 {
		t.Error("Schema() changed the schema")
	}
	if err := v.Validate(json.RawMessage(`{"a":2}`)); err != nil {
		t.Error(err)
	}
	if err := v.Validate(nil); err == nil {
		t.Error("empty arguments passed a schema with a required field")
	}
}

func FuzzValidateArgs(f *testing.F) {
	f.Add(draft07, `{"a":1}`)
	f.Add(`{"type":"object","properties":{"x":{"type":"array","items":{"type":"integer"}}}}`, `{"x":[1,"2"]}`)
	f.Add(`{"type":"object","additionalProperties":false}`, `{"x":null}`)
	f.Add(`{"anyOf":[{"type":"string"},{"type":"object"}]}`, `[]`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		v, err := tool.NewValidator(json.RawMessage(schema))
		if err != nil {
			return
		}
		err = v.Validate(json.RawMessage(args))
		var ae *tool.ArgumentError
		if err != nil && (!errors.As(err, &ae) || ae.Error() == "") {
			t.Fatalf("Validate returned %T %v, want *ArgumentError", err, err)
		}
	})
}
