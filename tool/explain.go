package tool

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// explain walks an instance that failed validation alongside its schema and
// names the first problem it understands: a wrong type, a missing required
// field, an unknown field or a value outside an enum, at a path the model can
// read ("items[2].name"). It returns nil when the failure lies in keywords it
// does not follow ($ref, combinators, patterns, ranges); the caller then
// falls back to the validator's message.
func explain(s *jsonschema.Schema, v any, path string) *ArgumentError {
	if s == nil || s.Ref != "" || s.DynamicRef != "" {
		return nil
	}
	if want := schemaTypes(s); len(want) > 0 && !typeMatches(want, v) {
		if path == "" {
			return &ArgumentError{Problem: fmt.Sprintf("arguments must be a JSON %s, got %s", strings.Join(want, " or "), describe(v))}
		}
		return &ArgumentError{Field: path, Problem: fmt.Sprintf("must be %s, got %s", strings.Join(want, " or "), describe(v))}
	}
	if s.Enum != nil && !slices.ContainsFunc(s.Enum, func(e any) bool { return jsonschema.Equal(e, v) }) {
		return &ArgumentError{Field: path, Problem: fmt.Sprintf("must be one of %s, got %s", list(s.Enum), describe(v))}
	}
	switch v := v.(type) {
	case map[string]any:
		return explainObject(s, v, path)
	case []any:
		if s.Items == nil {
			return nil
		}
		for i, e := range v {
			if ae := explain(s.Items, e, path+"["+strconv.Itoa(i)+"]"); ae != nil {
				return ae
			}
		}
	}
	return nil
}

func explainObject(s *jsonschema.Schema, v map[string]any, path string) *ArgumentError {
	for _, name := range s.Required {
		if _, ok := v[name]; !ok {
			return &ArgumentError{Field: join(path, name), Problem: "is required"}
		}
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	closed := isFalse(s.AdditionalProperties) && len(s.PatternProperties) == 0
	for _, k := range keys {
		if _, ok := s.Properties[k]; !ok && closed {
			return &ArgumentError{Field: join(path, k), Problem: "is not allowed" + known(s)}
		}
	}
	for _, k := range keys {
		sub, ok := s.Properties[k]
		if !ok {
			sub = s.AdditionalProperties
		}
		if ae := explain(sub, v[k], join(path, k)); ae != nil {
			return ae
		}
	}
	return nil
}

// schemaTypes returns the types a schema allows, empty if unconstrained.
func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func typeMatches(want []string, v any) bool {
	got := jsonType(v)
	for _, w := range want {
		if w == got || (w == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// describe renders a value briefly: its type, and the value itself when short.
func describe(v any) string {
	switch v.(type) {
	case []any, map[string]any:
		return jsonType(v)
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return jsonType(v)
	}
	return jsonType(v) + " " + string(b)
}

func list(vals []any) string {
	parts := make([]string, len(vals))
	for i, e := range vals {
		b, _ := json.Marshal(e)
		parts[i] = string(b)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// known lists the properties an object accepts, for "is not allowed".
func known(s *jsonschema.Schema) string {
	if len(s.Properties) == 0 {
		return " (no fields are accepted)"
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, strconv.Quote(k))
	}
	sort.Strings(names)
	return " (known fields: " + strings.Join(names, ", ") + ")"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// isFalse reports whether s is the schema that matches nothing (false, or
// {"not": {}}).
func isFalse(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}
