package scripted

import (
	"encoding/json"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/stepwise-run/stepwise/internal/yamlnode"
)

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// jsonValue appends the JSON form of n to b, keeping mapping key order.
func (d *decoder) jsonValue(b []byte, n *yaml.Node, field string) ([]byte, bool) {
	if n = d.Resolve(n); n == nil {
		return b, false
	}
	if d.Depth++; d.Depth > yamlnode.MaxDepth {
		d.Errorf(n, field, "nested too deeply (an alias to itself?)")
		return b, false
	}
	defer func() { d.Depth-- }()
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := d.Resolve(n.Content[i])
			if k == nil {
				return b, false
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				d.Errorf(k, field, "keys must be strings")
				return b, false
			}
			if seen[k.Value] {
				d.Errorf(k, yamlnode.Join(field, k.Value), "duplicate key")
				return b, false
			}
			seen[k.Value] = true
			if i > 0 {
				b = append(b, ',')
			}
			kb, _ := json.Marshal(k.Value)
			b = append(b, kb...)
			b = append(b, ':')
			var ok bool
			if b, ok = d.jsonValue(b, n.Content[i+1], yamlnode.Join(field, k.Value)); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, v := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = d.jsonValue(b, v, field+"["+strconv.Itoa(i)+"]"); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return append(b, "null"...), true
		case "!!bool":
			var v bool
			if n.Decode(&v) != nil {
				break
			}
			return strconv.AppendBool(b, v), true
		case "!!int", "!!float":
			if jsonNumber.MatchString(n.Value) {
				return append(b, n.Value...), true
			}
			var v float64
			if n.Decode(&v) != nil || v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308 {
				d.Errorf(n, field, "number %q has no JSON form", n.Value)
				return b, false
			}
			return strconv.AppendFloat(b, v, 'g', -1, 64), true
		case "!!str", "!!timestamp", "!!binary":
			sb, _ := json.Marshal(n.Value)
			return append(b, sb...), true
		}
		d.Errorf(n, field, "unsupported YAML tag %s", n.Tag)
		return b, false
	}
	d.Errorf(n, field, "unsupported YAML node")
	return b, false
}
