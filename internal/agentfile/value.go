package agentfile

import (
	"github.com/stepwise-run/stepwise/internal/yamlnode"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// positive reads an integer ≥ 1.
func (d *decoder) positive(n *yaml.Node, field string) int {
	return int(d.Integer(n, field, 1, math.MaxInt32, "a positive integer"))
}

// positiveDuration reads a Go duration > 0.
func (d *decoder) positiveDuration(n *yaml.Node, field string) time.Duration {
	const want = `a positive Go duration such as "30s" or "5m"`
	s := d.Scalar(n, field, want)
	if s == nil || yamlnode.IsNull(s) {
		return 0
	}
	v, err := time.ParseDuration(s.Value)
	if err != nil || v <= 0 {
		d.Errorf(s, field, "must be %s", want)
		return 0
	}
	return v
}

// float reads a finite number in [lo, hi].
func (d *decoder) float(n *yaml.Node, field string, lo, hi float64, want string) float64 {
	s := d.Scalar(n, field, want)
	if s == nil || yamlnode.IsNull(s) {
		return 0
	}
	var v float64
	if tag := s.ShortTag(); (tag != "!!int" && tag != "!!float") || s.Decode(&v) != nil ||
		math.IsNaN(v) || v < lo || v > hi {
		d.Errorf(s, field, "must be %s", want)
		return 0
	}
	return v
}

// strList reads a list of strings, each checked by ok (nil: any non-empty).
func (d *decoder) strList(n *yaml.Node, field, want string, ok func(string) bool) []string {
	var out []string
	d.List(n, field, func(_ int, v *yaml.Node, f string) {
		s := d.Scalar(v, f, want)
		if s == nil {
			return
		}
		if s.ShortTag() != "!!str" || s.Value == "" || (ok != nil && !ok(s.Value)) {
			d.Errorf(s, f, "must be %s", want)
			return
		}
		out = append(out, s.Value)
	})
	return out
}

// stringMap reads a mapping of strings; keys are checked by ok.
func (d *decoder) stringMap(n *yaml.Node, field, keyWant string, ok func(string) bool) map[string]string {
	var out map[string]string
	d.Object(n, field, func(key string, v *yaml.Node, f string) bool {
		if !ok(key) {
			d.Errorf(v, f, "key must be %s", keyWant)
			return true
		}
		s := d.Scalar(v, f, "a string")
		if s == nil {
			return true
		}
		if out == nil {
			out = make(map[string]string)
		}
		if !yamlnode.IsNull(s) {
			out[key] = s.Value
		} else {
			out[key] = ""
		}
		return true
	})
	return out
}

// value converts n to a JSON-compatible Go value: map[string]any, []any,
// string, bool, int64, float64 or nil.
func (d *decoder) value(n *yaml.Node, field string) (any, bool) {
	if n = d.Resolve(n); n == nil {
		return nil, false
	}
	if d.Depth++; d.Depth > yamlnode.MaxDepth {
		d.Errorf(n, field, "nested too deeply (an alias to itself?)")
		return nil, false
	}
	defer func() { d.Depth-- }()
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := d.Resolve(n.Content[i])
			if k == nil {
				return nil, false
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				d.Errorf(k, field, "keys must be strings")
				return nil, false
			}
			f := yamlnode.Join(field, k.Value)
			if _, dup := m[k.Value]; dup {
				d.Errorf(k, f, "duplicate key")
				return nil, false
			}
			v, ok := d.value(n.Content[i+1], f)
			if !ok {
				return nil, false
			}
			m[k.Value] = v
		}
		return m, true
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, ok := d.value(c, field+"["+strconv.Itoa(i)+"]")
			if !ok {
				return nil, false
			}
			l = append(l, v)
		}
		return l, true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool":
			var v bool
			if n.Decode(&v) == nil {
				return v, true
			}
		case "!!int":
			var v int64
			if n.Decode(&v) == nil {
				return v, true
			}
			var f float64
			if n.Decode(&f) == nil && !math.IsInf(f, 0) {
				return f, true
			}
		case "!!float":
			var v float64
			if n.Decode(&v) == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
				return v, true
			}
		case "!!str", "!!timestamp", "!!binary":
			return n.Value, true
		default:
			d.Errorf(n, field, "unsupported YAML tag %s", n.Tag)
			return nil, false
		}
		d.Errorf(n, field, "value %q has no JSON form", n.Value)
		return nil, false
	}
	d.Errorf(n, field, "unsupported YAML node")
	return nil, false
}
