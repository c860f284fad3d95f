package otlpingest

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// attrs are the attributes of a span, event or log record as Go values:
// string, int64, float64, bool, []any, map[string]any or []byte.
type attrs map[string]any

func toAttrs(kvs []*commonpb.KeyValue) attrs {
	a := make(attrs, len(kvs))
	for _, kv := range kvs {
		a[kv.GetKey()] = anyValue(kv.GetValue())
	}
	return a
}

// anyValue converts an OTLP AnyValue to a Go value.
func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, anyValue(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return map[string]any(toAttrs(x.KvlistValue.GetValues()))
	}
	return nil
}

// str returns the attribute as a string ("" when absent); numbers and
// booleans are formatted, structures encoded as JSON.
func (a attrs) str(key string) string { return asString(a[key]) }

func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// num returns the first of keys present as an integer.
func (a attrs) num(keys ...string) int64 {
	for _, k := range keys {
		switch x := a[k].(type) {
		case int64:
			return x
		case float64:
			return int64(x)
		case string:
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n
			}
		}
	}
	return 0
}

// first returns the first non-empty string attribute of keys.
func (a attrs) first(keys ...string) string {
	for _, k := range keys {
		if s := a.str(k); s != "" {
			return s
		}
	}
	return ""
}

// strs returns an attribute that is a string array (or one string).
func (a attrs) strs(key string) []string {
	switch x := a[key].(type) {
	case string:
		if strings.HasPrefix(x, "[") {
			var out []string
			if json.Unmarshal([]byte(x), &out) == nil {
				return out
			}
		}
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, asString(e))
		}
		return out
	}
	return nil
}

// jsonValue returns the attribute as a decoded JSON value: a string
// attribute holding JSON is parsed, a structured one is returned as is.
func (a attrs) jsonValue(key string) (any, bool) {
	v, ok := a[key]
	if !ok {
		return nil, false
	}
	if s, isStr := v.(string); isStr {
		var out any
		if json.Unmarshal([]byte(s), &out) != nil {
			return nil, false
		}
		return out, true
	}
	return v, true
}

// rawJSON returns v as JSON: a string that already is JSON is kept,
// another string becomes a JSON string.
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if s, ok := v.(string); ok {
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func hexID(b []byte) string { return hex.EncodeToString(b) }
