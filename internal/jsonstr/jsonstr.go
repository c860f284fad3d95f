// Package jsonstr writes JSON strings byte for byte as encoding/json does,
// without reflection: for hand-written encoders on hot paths (the SSE
// events, the message hash chain) whose bytes must equal the encoder's.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s as a JSON string, escaping exactly as encoding/json
// (control characters, quotes, backslashes, <, >, &, U+2028 and U+2029;
// invalid UTF-8 becomes U+FFFD).
func Append(b []byte, s string) []byte {
	b, _ = AppendValid(b, s)
	return b
}

// AppendValid is Append that also reports whether s is valid UTF-8: when
// it is not, what was written decodes to another string (U+FFFD for each
// invalid byte).
func AppendValid(b []byte, s string) (_ []byte, valid bool) {
	valid = true
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			valid = false
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"'), valid
}
