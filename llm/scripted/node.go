package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ParseError is one problem in a script file, located by line and field.
// Parse and Load return one or more of them joined with errors.Join;
// errors.As finds the first.
type ParseError struct {
	File  string // the name given to Parse or the path given to Load
	Line  int    // 1-based line, 0 when unknown
	Field string // path of the offending field, e.g. "turns[2].delay"; empty for document errors
	Msg   string // what is wrong
}

// Error formats the error as "file:line: field: message".
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

const (
	maxErrors  = 20        // errors reported per file before giving up
	nodeBudget = 1_000_000 // nodes visited, aliases expanded, before giving up
	maxDepth   = 256       // nesting of free-form values (a cyclic alias never ends)
)

// decoder walks a yaml.v3 node tree, collecting located errors.
type decoder struct {
	file   string
	errs   []error
	budget int
	depth  int // nesting of the free-form value being read
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	if len(d.errs) > maxErrors {
		return
	}
	if len(d.errs) == maxErrors {
		d.errs = append(d.errs, &ParseError{File: d.file, Msg: "too many errors"})
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &ParseError{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

// resolve follows aliases and charges the visit to the budget; it returns
// nil when the budget is spent.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode; depth++ {
		if depth > 100 {
			return nil
		}
		n = n.Alias
	}
	d.budget--
	if d.budget == 0 {
		d.errorf(n, "", "document too large or too many aliases")
	}
	if d.budget < 0 {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as one YAML (or JSON) document. JSON is recognised by
// a .json extension or a leading '{' or '['; it is checked with
// encoding/json first so syntax errors name their line.
func document(file string, data []byte) (*yaml.Node, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) == 0 {
		return nil, &ParseError{File: file, Msg: "empty document"}
	}
	if strings.EqualFold(path.Ext(file), ".json") || trimmed[0] == '{' || trimmed[0] == '[' {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			pe := &ParseError{File: file, Msg: "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
			var se *json.SyntaxError
			if errors.As(err, &se) {
				pe.Line = 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte{'\n'})
			}
			return nil, pe
		}
		// Valid JSON holds tabs only as whitespace, which YAML refuses in
		// some places; spaces keep every offset.
		data = bytes.ReplaceAll(data, []byte{'\t'}, []byte{' '})
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &ParseError{File: file, Msg: "empty document"}
		}
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, yamlError(file, err)
		}
		return nil, &ParseError{File: file, Line: extra.Line, Msg: "more than one YAML document"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return nil, &ParseError{File: file, Msg: "empty document"}
}

func yamlError(file string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ParseError{File: file, Line: line, Msg: m[2]}
	}
	return &ParseError{File: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// object walks a mapping: set is called with each key, its value and the
// field path, and reports whether the key is known. Duplicate and unknown
// keys are errors. A null value is an empty mapping.
func (d *decoder) object(n *yaml.Node, field string, set func(key string, v *yaml.Node, field string) bool) {
	if n = d.resolve(n); n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, field, "must be a mapping")
		return
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.resolve(n.Content[i]), n.Content[i+1]
		if k == nil {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, field, "keys must be strings")
			continue
		}
		if k.Tag == "!!merge" || k.ShortTag() == "!!merge" {
			d.errorf(k, field, "merge keys (<<) are not supported")
			continue
		}
		f := join(field, k.Value)
		if seen[k.Value] {
			d.errorf(k, f, "duplicate field")
			continue
		}
		seen[k.Value] = true
		if !set(k.Value, v, f) {
			d.errorf(k, f, "unknown field")
		}
	}
}

// list walks a sequence; a null value is an empty list.
func (d *decoder) list(n *yaml.Node, field string, each func(i int, v *yaml.Node, field string)) {
	if n = d.resolve(n); n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, field, "must be a list")
		return
	}
	for i, v := range n.Content {
		each(i, v, field+"["+strconv.Itoa(i)+"]")
	}
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// scalar returns the resolved scalar node, or reports what was expected.
func (d *decoder) scalar(n *yaml.Node, field, want string) *yaml.Node {
	if n = d.resolve(n); n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, field, "must be %s", want)
		return nil
	}
	return n
}

func (d *decoder) str(n *yaml.Node, field string) string {
	s := d.scalar(n, field, "a string")
	if s == nil || isNull(s) {
		return ""
	}
	return s.Value
}

func (d *decoder) integer(n *yaml.Node, field string, lo, hi int64, want string) int64 {
	s := d.scalar(n, field, want)
	if s == nil || isNull(s) {
		return 0
	}
	var v int64
	if s.ShortTag() != "!!int" || s.Decode(&v) != nil || v < lo || v > hi {
		d.errorf(s, field, "must be %s", want)
		return 0
	}
	return v
}

func (d *decoder) boolean(n *yaml.Node, field string) bool {
	s := d.scalar(n, field, "true or false")
	if s == nil || isNull(s) {
		return false
	}
	var v bool
	if s.ShortTag() != "!!bool" || s.Decode(&v) != nil {
		d.errorf(s, field, "must be true or false")
	}
	return v
}

func (d *decoder) duration(n *yaml.Node, field string) time.Duration {
	const want = `a non-negative Go duration such as "250ms" or "2s"`
	s := d.scalar(n, field, want)
	if s == nil || isNull(s) {
		return 0
	}
	v, err := time.ParseDuration(s.Value)
	if err != nil || v < 0 {
		d.errorf(s, field, "must be %s", want)
		return 0
	}
	return v
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// jsonValue appends the JSON form of n to b, keeping mapping key order.
func (d *decoder) jsonValue(b []byte, n *yaml.Node, field string) ([]byte, bool) {
	if n = d.resolve(n); n == nil {
		return b, false
	}
	if d.depth++; d.depth > maxDepth {
		d.errorf(n, field, "nested too deeply (an alias to itself?)")
		return b, false
	}
	defer func() { d.depth-- }()
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := d.resolve(n.Content[i])
			if k == nil {
				return b, false
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				d.errorf(k, field, "keys must be strings")
				return b, false
			}
			if seen[k.Value] {
				d.errorf(k, join(field, k.Value), "duplicate key")
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
			if b, ok = d.jsonValue(b, n.Content[i+1], join(field, k.Value)); !ok {
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
				d.errorf(n, field, "number %q has no JSON form", n.Value)
				return b, false
			}
			return strconv.AppendFloat(b, v, 'g', -1, 64), true
		case "!!str", "!!timestamp", "!!binary":
			sb, _ := json.Marshal(n.Value)
			return append(b, sb...), true
		}
		d.errorf(n, field, "unsupported YAML tag %s", n.Tag)
		return b, false
	}
	d.errorf(n, field, "unsupported YAML node")
	return b, false
}
