package tool

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// flatDecoder decodes the common arguments of a typed tool without
// encoding/json: an object whose keys are exactly the json names of the
// fields of a flat struct (strings, bools, integers and floats), with
// plain values. Anything else — an escape in a string or a key, a key that
// matches a field only case-insensitively or not at all, null, a nested
// value, a number that does not fit — makes decode report false, and the
// caller decodes with encoding/json, which then decides (and explains) as
// always: the fast path gives the same value or steps aside.
type flatDecoder struct {
	fields map[string]flatField
}

// flatField is a field of the struct: its index and kind.
type flatField struct {
	index int
	kind  reflect.Kind
	bits  int
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// customDecoded reports whether encoding/json decodes t (or *t) with a
// method of its own.
func customDecoded(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// newFlatDecoder returns the decoder of t, or nil when t is not a flat
// struct (then arguments always go to encoding/json).
func newFlatDecoder(t reflect.Type) *flatDecoder {
	if t.Kind() != reflect.Struct || customDecoded(t) {
		return nil
	}
	d := &flatDecoder{fields: map[string]flatField{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil // embedded fields follow encoding/json's promotion rules
		}
		if !f.IsExported() {
			continue // encoding/json ignores it too
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, opts, _ := strings.Cut(tag, ",")
			if n == "-" && opts == "" {
				continue
			}
			for _, o := range strings.Split(opts, ",") {
				if o != "" && o != "omitempty" && o != "omitzero" {
					return nil // ",string" and the like
				}
			}
			if n != "" {
				name = n
			}
		}
		if _, dup := d.fields[name]; dup || customDecoded(f.Type) || f.Type == reflect.TypeFor[json.Number]() {
			return nil
		}
		ff := flatField{index: i, kind: f.Type.Kind()}
		switch ff.kind {
		case reflect.String, reflect.Bool:
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			ff.bits = f.Type.Bits()
		default:
			return nil
		}
		d.fields[name] = ff
	}
	return d
}

// decode decodes args into v (an addressable struct of d's type, zero),
// or reports false, having perhaps set some fields.
func (d *flatDecoder) decode(args []byte, v reflect.Value) bool {
	i := skipSpace(args, 0)
	if i >= len(args) || args[i] != '{' {
		return false
	}
	i = skipSpace(args, i+1)
	if i < len(args) && args[i] == '}' {
		return skipSpace(args, i+1) == len(args)
	}
	for {
		key, j, ok := plainString(args, i)
		if !ok {
			return false
		}
		f, known := d.fields[key]
		if !known {
			return false
		}
		i = skipSpace(args, j)
		if i >= len(args) || args[i] != ':' {
			return false
		}
		i = skipSpace(args, i+1)
		if i, ok = f.set(args, i, v.Field(f.index)); !ok {
			return false
		}
		i = skipSpace(args, i)
		if i >= len(args) {
			return false
		}
		switch args[i] {
		case ',':
			i = skipSpace(args, i+1)
		case '}':
			return skipSpace(args, i+1) == len(args)
		default:
			return false
		}
	}
}

// set decodes the value at args[i:] into fv and returns the index after it.
func (f flatField) set(args []byte, i int, fv reflect.Value) (int, bool) {
	switch f.kind {
	case reflect.String:
		s, j, ok := plainString(args, i)
		if ok {
			fv.SetString(s)
		}
		return j, ok
	case reflect.Bool:
		switch {
		case len(args)-i >= 4 && string(args[i:i+4]) == "true":
			fv.SetBool(true)
			return i + 4, true
		case len(args)-i >= 5 && string(args[i:i+5]) == "false":
			fv.SetBool(false)
			return i + 5, true
		}
		return i, false
	}
	j, isInt := number(args, i)
	if j == i {
		return i, false
	}
	switch f.kind {
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(string(args[i:j]), f.bits) // as encoding/json parses it
		if err != nil {
			return i, false
		}
		fv.SetFloat(x)
		return j, true
	}
	if !isInt {
		return i, false
	}
	// An integer, as strconv.ParseInt or ParseUint at the field's size
	// would read it (a minus sign for an unsigned field goes to
	// encoding/json, which refuses it).
	neg := args[i] == '-'
	var mag uint64
	for _, c := range args[i:j] {
		if c == '-' {
			continue
		}
		if mag > (1<<64-1)/10 {
			return i, false
		}
		mag *= 10
		d := uint64(c - '0')
		if mag > 1<<64-1-d {
			return i, false
		}
		mag += d
	}
	switch f.kind {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if neg || (f.bits < 64 && mag >= 1<<f.bits) {
			return i, false
		}
		fv.SetUint(mag)
	default:
		limit := uint64(1) << (f.bits - 1) // -limit .. limit-1
		switch {
		case neg && mag <= limit:
			fv.SetInt(int64(-mag))
		case !neg && mag < limit:
			fv.SetInt(int64(mag))
		default:
			return i, false
		}
	}
	return j, true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the JSON string at b[i:] when it has no escape and no
// control character and is valid UTF-8 (encoding/json would replace what
// is not), and returns it and the index after it.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return "", i, false
			}
			return string(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", i, false
}

// number reads the JSON number at b[i:] (the JSON grammar: no leading
// zeros, no plus sign) and returns the index after it (i: none) and
// whether it is an integer (no fraction, no exponent).
func number(b []byte, i int) (int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		j = digits(b, j)
	default:
		return i, false
	}
	isInt := true
	if j < len(b) && b[j] == '.' {
		isInt = false
		j++
		k := digits(b, j)
		if k == j {
			return i, false
		}
		j = k
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		isInt = false
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := digits(b, j)
		if k == j {
			return i, false
		}
		j = k
	}
	return j, isInt
}

// digits returns the index after the run of decimal digits at b[j:].
func digits(b []byte, j int) int {
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return j
}
