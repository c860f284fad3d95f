package stepwise

import (
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/llm"
)

// appendMessageJSON appends what encoding/json writes for m (field order,
// omitempty, HTML escaping), without reflection, and reports whether it
// could: a string with a character encoding/json escapes other than
// '"', '\\', '\n', '\r' and '\t' (other control characters, '<', '>',
// '&', U+2028, U+2029, invalid UTF-8), or tool-call arguments that are not
// canonical (see isCanonical: compact, written back unchanged), make it
// return false, and the caller encodes with encoding/json. The message
// hash chain is built from these bytes, so they must never differ
// (TestAppendMessageJSONMatchesEncoder).
func appendMessageJSON(dst []byte, m *llm.Message) ([]byte, bool) {
	var ok bool
	dst = append(dst, `{"role":`...)
	if dst, ok = appendPlainString(dst, string(m.Role)); !ok {
		return dst, false
	}
	for _, f := range [...]struct{ key, v string }{{`,"content":`, m.Content}, {`,"reasoning":`, m.Reasoning}} {
		if f.v == "" {
			continue
		}
		dst = append(dst, f.key...)
		if dst, ok = appendPlainString(dst, f.v); !ok {
			return dst, false
		}
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			tc := &m.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			if dst, ok = appendPlainString(dst, tc.ID); !ok {
				return dst, false
			}
			dst = append(dst, `,"name":`...)
			if dst, ok = appendPlainString(dst, tc.Name); !ok {
				return dst, false
			}
			if !isCanonical(tc.Arguments) {
				return dst, false
			}
			dst = append(dst, `,"arguments":`...)
			dst = append(dst, tc.Arguments...)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	for _, f := range [...]struct{ key, v string }{{`,"tool_call_id":`, m.ToolCallID}, {`,"tool_name":`, m.ToolName}} {
		if f.v == "" {
			continue
		}
		dst = append(dst, f.key...)
		if dst, ok = appendPlainString(dst, f.v); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendPlainString appends s as a JSON string the way encoding/json
// writes it, or reports false for a string it leaves to encoding/json.
func appendPlainString(dst []byte, s string) ([]byte, bool) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return dst, false
			}
			i += size
			continue
		}
		var esc byte
		switch {
		case b == '"' || b == '\\':
			esc = b
		case b == '\n':
			esc = 'n'
		case b == '\r':
			esc = 'r'
		case b == '\t':
			esc = 't'
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			return dst, false
		default:
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, '\\', esc)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}
