package rules

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
)

// CloneStep's metadata is its own: a map of scalars copied as a table and a
// nested one copied value by value both survive changes to the copy.
func TestCloneStepMetadataIsDeep(t *testing.T) {
	for name, meta := range map[string]func() map[string]any{
		"scalars": func() map[string]any { return map[string]any{"s": "v", "f": 1.5, "b": true, "n": nil, "i": 3} },
		"nested": func() map[string]any {
			return map[string]any{"s": "v", "m": map[string]any{"k": "v"}, "l": []any{"x", map[string]any{"k": 1.0}}, "raw": json.RawMessage(`{"a":1}`)}
		},
	} {
		in := &steptype.Step{ID: "x", Metadata: meta()}
		want := meta()
		c := CloneStep(in)
		if !reflect.DeepEqual(c.Metadata, in.Metadata) {
			t.Fatalf("%s: clone %v, want %v", name, c.Metadata, in.Metadata)
		}
		for k, v := range c.Metadata {
			switch v := v.(type) {
			case map[string]any:
				v["k"] = "changed"
			case []any:
				v[0] = "changed"
				v[1].(map[string]any)["k"] = "changed"
			case json.RawMessage:
				v[0] = 'X'
			}
			c.Metadata[k] = "changed"
		}
		c.Metadata["new"] = 1
		if !reflect.DeepEqual(in.Metadata, want) {
			t.Errorf("%s: changing the clone changed the original: %v", name, in.Metadata)
		}
	}
}
