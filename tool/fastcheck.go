package tool

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// fastNode is a schema compiled for the allocation-free check of the
// common case: the schemas jsonschema.For infers (type, properties,
// required, additionalProperties false, items) plus annotations. A schema
// with any other keyword is not compiled (compileFast returns nil) and is
// always checked by the full validator.
type fastNode struct {
	types    uint8 // bit set of fastType; 0: any type
	props    map[string]*fastNode
	required []string
	closed   bool      // additionalProperties: false
	items    *fastNode // nil: any items
}

// JSON types as bits of fastNode.types.
const (
	fastNull uint8 = 1 << iota
	fastBool
	fastInteger
	fastNumber
	fastString
	fastArray
	fastObject
)

var fastTypes = map[string]uint8{
	"null": fastNull, "boolean": fastBool, "integer": fastInteger, "number": fastNumber,
	"string": fastString, "array": fastArray, "object": fastObject,
}

// fastAllowed are the Schema fields the fast check understands; the
// others must be zero for a node to compile.
var fastAllowed = []string{"Schema", "Comment", "Title", "Description", "Default", "Deprecated", "ReadOnly",
	"WriteOnly", "Examples", "Format", "Type", "Types", "Properties", "PropertyOrder", "Required",
	"AdditionalProperties", "Items"}

// compileFast compiles s, or returns nil when s uses a keyword outside the
// fast subset (the caller then always uses the full validator).
func compileFast(s *jsonschema.Schema, depth int) *fastNode {
	if s == nil || depth > 32 {
		return nil
	}
	rest := *s
	v := reflect.ValueOf(&rest).Elem()
	for _, f := range fastAllowed {
		fv := v.FieldByName(f)
		if !fv.IsValid() {
			return nil // the library changed: do not guess
		}
		fv.SetZero()
	}
	if !v.IsZero() {
		return nil
	}
	n := &fastNode{required: s.Required}
	if s.Type != "" {
		t, ok := fastTypes[s.Type]
		if !ok {
			return nil
		}
		n.types = t
	}
	for _, name := range s.Types {
		t, ok := fastTypes[name]
		if !ok {
			return nil
		}
		n.types |= t
	}
	if n.types&fastNumber != 0 {
		n.types |= fastInteger // "number" subsumes integers
	}
	if len(s.Properties) > 0 {
		n.props = make(map[string]*fastNode, len(s.Properties))
		for name, p := range s.Properties {
			c := compileFast(p, depth+1)
			if c == nil {
				return nil
			}
			n.props[name] = c
		}
	}
	if a := s.AdditionalProperties; a != nil {
		rest := *a
		rest.Not = nil
		switch {
		case !reflect.ValueOf(rest).IsZero():
			return nil
		case a.Not == nil: // true: anything
		case reflect.ValueOf(*a.Not).IsZero():
			n.closed = true // false: {"not": {}}
		default:
			return nil
		}
	}
	if s.Items != nil {
		if n.items = compileFast(s.Items, depth+1); n.items == nil {
			return nil
		}
	}
	return n
}

// fastValid reports whether args certainly satisfy the schema compiled
// into n. false means "not certain": the full validator then decides (and
// explains). args must be valid JSON.
func (n *fastNode) fastValid(args []byte) bool {
	if !json.Valid(args) {
		return false
	}
	c := fastCursor{b: args}
	return c.value(n, 0) && c.skipSpace() == len(c.b)
}

// fastCursor walks JSON that json.Valid accepted.
type fastCursor struct {
	b []byte
	i int
}

func (c *fastCursor) skipSpace() int {
	c.i = skipSpace(c.b, c.i)
	return c.i
}

// value checks the value at the cursor against n (nil: any) and moves past it.
func (c *fastCursor) value(n *fastNode, depth int) bool {
	if depth > 64 {
		return false
	}
	c.skipSpace()
	if c.i >= len(c.b) {
		return false
	}
	var t uint8
	switch ch := c.b[c.i]; {
	case ch == '{':
		t = fastObject
	case ch == '[':
		t = fastArray
	case ch == '"':
		t = fastString
	case ch == 't' || ch == 'f':
		t = fastBool
	case ch == 'n':
		t = fastNull
	default:
		t = c.numberType()
		if t == 0 {
			return false
		}
	}
	if n != nil && n.types != 0 && n.types&t == 0 {
		return false
	}
	switch t {
	case fastObject:
		return c.object(n, depth)
	case fastArray:
		var items *fastNode
		if n != nil {
			items = n.items
		}
		c.i++
		if c.skipSpace(); c.b[c.i] == ']' {
			c.i++
			return true
		}
		for {
			if !c.value(items, depth+1) {
				return false
			}
			c.skipSpace()
			if c.b[c.i] == ']' {
				c.i++
				return true
			}
			c.i++ // ','
		}
	case fastString:
		c.str() // any content is a string
	case fastBool:
		if c.b[c.i] == 't' {
			c.i += 4
		} else {
			c.i += 5
		}
	case fastNull:
		c.i += 4
	}
	return true
}

// numberType scans a number: fastInteger for a plain integer literal that
// decodes exactly, fastNumber for one with a fraction or exponent, 0 when
// it is too long to be sure it decodes (the full path then decides).
func (c *fastCursor) numberType() uint8 {
	start, t := c.i, fastInteger
	for c.i < len(c.b) {
		switch ch := c.b[c.i]; {
		case ch >= '0' && ch <= '9' || ch == '-' || ch == '+':
		case ch == '.' || ch == 'e' || ch == 'E':
			t = fastNumber
		default:
			goto done
		}
		c.i++
	}
done:
	if c.i-start > 300 {
		return 0 // may overflow a float64: let the full path decide
	}
	return t
}

// str moves past a string and returns its raw content; ok is false when
// the content has an escape or a non-ASCII byte (a key then cannot be
// matched by bytes).
func (c *fastCursor) str() (raw []byte, plain bool) {
	c.i++ // opening quote
	start, plain := c.i, true
	for {
		switch ch := c.b[c.i]; {
		case ch == '"':
			raw = c.b[start:c.i]
			c.i++
			return raw, plain
		case ch == '\\':
			plain = false
			c.i += 2
			continue
		case ch >= 0x80:
			plain = false
		}
		c.i++
	}
}

// object checks an object's members against n's properties, required
// names and additionalProperties.
func (c *fastCursor) object(n *fastNode, depth int) bool {
	c.i++
	var seen uint64 // bit i: n.required[i] is present
	if n != nil && len(n.required) > 64 {
		return false
	}
	for {
		c.skipSpace()
		if c.b[c.i] == '}' {
			c.i++
			break
		}
		if c.b[c.i] == ',' {
			c.i++
			c.skipSpace()
		}
		key, plain := c.str()
		var sub *fastNode
		if n != nil {
			if !plain {
				return false // an escaped or non-ASCII key: let the full path decide
			}
			var ok bool
			sub, ok = n.props[string(key)]
			if !ok && n.closed {
				return false
			}
			for i, r := range n.required {
				if r == string(key) {
					seen |= 1 << i
				}
			}
		}
		c.skipSpace()
		c.i++ // ':'
		if !c.value(sub, depth+1) {
			return false
		}
	}
	return n == nil || seen == 1<<len(n.required)-1
}
