package convo

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/steptype"
)

// IsCanonical reports whether b is certainly already what CanonicalJSON
// would make of it (decoded into any and re-encoded by encoding/json), so
// that it can be used as is: compact, object keys plain and strictly
// increasing, strings without characters the encoder escapes differently,
// numbers plain integers of at most 15 digits. false means "not certain",
// never "invalid": the caller then re-encodes. It allocates nothing.
func IsCanonical(b []byte) bool {
	c := canonCursor{b: b}
	return c.value(0) && c.i == len(b)
}

type canonCursor struct {
	b []byte
	i int
}

func (c *canonCursor) value(depth int) bool {
	if c.i >= len(c.b) || depth > 64 {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return c.object(depth)
	case ch == '[':
		c.i++
		if c.peek(']') {
			return true
		}
		for {
			if !c.value(depth + 1) {
				return false
			}
			if c.peek(']') {
				return true
			}
			if !c.peek(',') {
				return false
			}
		}
	case ch == '"':
		_, ok := c.str(false)
		return ok
	case ch == 't':
		return c.lit("true")
	case ch == 'f':
		return c.lit("false")
	case ch == 'n':
		return c.lit("null")
	}
	return c.integer()
}

// peek consumes ch when it is next.
func (c *canonCursor) peek(ch byte) bool {
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

func (c *canonCursor) lit(s string) bool {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return false
	}
	c.i += len(s)
	return true
}

// integer accepts -?(0|[1-9][0-9]*) of at most 15 digits, not -0: exactly
// a float64 that encoding/json writes back the same way.
func (c *canonCursor) integer() bool {
	neg := c.peek('-')
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	n := c.i - start
	switch {
	case n == 0 || n > 15:
		return false
	case c.b[start] == '0' && (n > 1 || neg):
		return false
	}
	return c.i == len(c.b) || c.b[c.i] != '.' && c.b[c.i] != 'e' && c.b[c.i] != 'E'
}

// str accepts a string the encoder writes back byte for byte and returns
// its raw content. A key (key true) must have no escape at all, so that raw
// bytes order like the decoded key.
func (c *canonCursor) str(key bool) ([]byte, bool) {
	c.i++
	start := c.i
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			c.i++
			return c.b[start : c.i-1], true
		case ch == '\\':
			if key || c.i+1 >= len(c.b) {
				return nil, false
			}
			switch c.b[c.i+1] {
			case '"', '\\', 'n', 'r', 't':
				c.i += 2
				continue
			}
			return nil, false
		case ch < 0x20 || ch == '<' || ch == '>' || ch == '&':
			return nil, false
		case ch >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return nil, false
			}
			c.i += size
			continue
		}
		c.i++
	}
	return nil, false
}

// object accepts members in strictly increasing key order (encoding/json
// sorts map keys bytewise; a duplicate key would collapse).
func (c *canonCursor) object(depth int) bool {
	c.i++
	if c.peek('}') {
		return true
	}
	var prev []byte
	for first := true; ; first = false {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return false
		}
		key, ok := c.str(true)
		if !ok || !first && string(key) <= string(prev) || !c.peek(':') || !c.value(depth+1) {
			return false
		}
		prev = key
		if c.peek('}') {
			return true
		}
		if !c.peek(',') {
			return false
		}
	}
}

// CanonicalCalls returns calls with canonical arguments (see CanonicalJSON),
// calls itself when every argument is canonical already.
func CanonicalCalls(calls []steptype.ToolCall) []steptype.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	if !slices.ContainsFunc(calls, func(c steptype.ToolCall) bool { return !IsCanonical(c.Arguments) }) {
		return calls // nothing to re-encode: no copy
	}
	out := make([]steptype.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = steptype.ToolCall{ID: c.ID, Name: c.Name, Arguments: CanonicalJSON(c.Arguments)}
	}
	return out
}

// CanonicalJSON re-encodes JSON with sorted keys and no insignificant
// whitespace; invalid JSON is returned unchanged.
func CanonicalJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || IsCanonical(b) {
		return b
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}
