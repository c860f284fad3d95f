// Package yamlnode walks yaml.v3 node trees for the strict file formats of
// Stepwise (agent files, model scripts): every problem is collected with its
// file, line and field path, unknown fields are errors, and alias bombs and
// cyclic aliases are bounded.
package yamlnode

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

// ParseError is one problem in a file, located by line and field.
// Parse and Load return one or more of them joined with errors.Join;
// errors.As finds the first.
type ParseError struct {
	File  string // the name given to Parse or the path given to Load
	Line  int    // 1-based line, 0 when unknown
	Field string // path of the offending field, e.g. "limits.max_steps" or "turns[2].delay"; empty for document errors
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
	// MaxDepth bounds the nesting of free-form values (a cyclic alias never ends).
	MaxDepth = 256
)

// Decoder walks a yaml.v3 node tree, collecting located errors.
type Decoder struct {
	file   string
	errs   []error
	budget int
	// Depth is the nesting of the free-form value being read; callers that
	// recurse into free-form values keep it below MaxDepth.
	Depth int
}

// NewDecoder returns a decoder for file.
func NewDecoder(file string) *Decoder { return &Decoder{file: file, budget: nodeBudget} }

// Failed reports whether an error was recorded.
func (d *Decoder) Failed() bool { return len(d.errs) > 0 }

func (d *Decoder) Errorf(n *yaml.Node, field, format string, args ...any) {
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

func (d *Decoder) Err() error { return errors.Join(d.errs...) }

// resolve follows aliases and charges the visit to the budget; it returns
// nil when the budget is spent.
func (d *Decoder) Resolve(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode; depth++ {
		if depth > 100 {
			return nil
		}
		n = n.Alias
	}
	d.budget--
	if d.budget == 0 {
		d.Errorf(n, "", "document too large or too many aliases")
	}
	if d.budget < 0 {
		return nil
	}
	return n
}

func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as one YAML (or JSON) document. JSON is recognised by
// a .json extension or a leading '{' or '['; it is checked with
// encoding/json first so syntax errors name their line.
func Document(file string, data []byte) (*yaml.Node, error) {
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
func (d *Decoder) Object(n *yaml.Node, field string, set func(key string, v *yaml.Node, field string) bool) {
	if n = d.Resolve(n); n == nil || IsNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, field, "must be a mapping")
		return
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.Resolve(n.Content[i]), n.Content[i+1]
		if k == nil {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.Errorf(k, field, "keys must be strings")
			continue
		}
		if k.Tag == "!!merge" || k.ShortTag() == "!!merge" {
			d.Errorf(k, field, "merge keys (<<) are not supported")
			continue
		}
		f := Join(field, k.Value)
		if seen[k.Value] {
			d.Errorf(k, f, "duplicate field")
			continue
		}
		seen[k.Value] = true
		if !set(k.Value, v, f) {
			d.Errorf(k, f, "unknown field")
		}
	}
}

// list walks a sequence; a null value is an empty list.
func (d *Decoder) List(n *yaml.Node, field string, each func(i int, v *yaml.Node, field string)) {
	if n = d.Resolve(n); n == nil || IsNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n, field, "must be a list")
		return
	}
	for i, v := range n.Content {
		each(i, v, field+"["+strconv.Itoa(i)+"]")
	}
}

func Join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// scalar returns the resolved scalar node, or reports what was expected.
func (d *Decoder) Scalar(n *yaml.Node, field, want string) *yaml.Node {
	if n = d.Resolve(n); n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		d.Errorf(n, field, "must be %s", want)
		return nil
	}
	return n
}

func (d *Decoder) Str(n *yaml.Node, field string) string {
	s := d.Scalar(n, field, "a string")
	if s == nil || IsNull(s) {
		return ""
	}
	return s.Value
}

func (d *Decoder) Integer(n *yaml.Node, field string, lo, hi int64, want string) int64 {
	s := d.Scalar(n, field, want)
	if s == nil || IsNull(s) {
		return 0
	}
	var v int64
	if s.ShortTag() != "!!int" || s.Decode(&v) != nil || v < lo || v > hi {
		d.Errorf(s, field, "must be %s", want)
		return 0
	}
	return v
}

func (d *Decoder) Boolean(n *yaml.Node, field string) bool {
	s := d.Scalar(n, field, "true or false")
	if s == nil || IsNull(s) {
		return false
	}
	var v bool
	if s.ShortTag() != "!!bool" || s.Decode(&v) != nil {
		d.Errorf(s, field, "must be true or false")
	}
	return v
}

func (d *Decoder) Duration(n *yaml.Node, field string) time.Duration {
	const want = `a non-negative Go duration such as "250ms" or "2s"`
	s := d.Scalar(n, field, want)
	if s == nil || IsNull(s) {
		return 0
	}
	v, err := time.ParseDuration(s.Value)
	if err != nil || v < 0 {
		d.Errorf(s, field, "must be %s", want)
		return 0
	}
	return v
}
