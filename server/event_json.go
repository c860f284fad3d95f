package server

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise"
)

// appendEvent appends the JSON of an SSE event (the shape of eventJSON) to
// b. It is written by hand because it runs once per event per subscriber:
// no reflection, and the step is encoded once, not re-validated.
func appendEvent(b []byte, ev *stepwise.Event) ([]byte, error) {
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, ev.Position.Seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, ev.Position.Idx, 10)
	b = append(b, `","type":`...)
	b = appendString(b, string(ev.Type))
	b = append(b, `,"session_id":`...)
	b = appendString(b, ev.SessionID)
	b = append(b, `,"run_id":`...)
	b = appendString(b, ev.RunID)
	b = append(b, `,"time":"`...)
	b = ev.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if ev.StepName != "" {
		b = append(b, `,"step_name":`...)
		b = appendString(b, ev.StepName)
	}
	if d := ev.Delta; d != nil {
		b = append(b, `,"delta":{`...)
		sep := ""
		if d.Content != "" {
			b = append(b, `"content":`...)
			b = appendString(b, d.Content)
			sep = ","
		}
		if d.Reasoning != "" {
			b = append(b, sep+`"reasoning":`...)
			b = appendString(b, d.Reasoning)
			sep = ","
		}
		if tc := d.ToolCall; tc != nil {
			b = append(b, sep+`"tool_call":{"index":`...)
			b = strconv.AppendInt(b, int64(tc.Index), 10)
			if tc.ID != "" {
				b = append(b, `,"id":`...)
				b = appendString(b, tc.ID)
			}
			if tc.Name != "" {
				b = append(b, `,"name":`...)
				b = appendString(b, tc.Name)
			}
			if tc.Arguments != "" {
				b = append(b, `,"arguments":`...)
				b = appendString(b, tc.Arguments)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if ev.Step != nil {
		var err error
		if b, err = ev.Step.AppendJSON(append(b, `,"step":`...)); err != nil {
			return b, err
		}
	}
	if ev.Run != nil {
		run, err := json.Marshal(ev.Run)
		if err != nil {
			return b, err
		}
		b = append(append(b, `,"run":`...), run...)
	}
	// Progress, yields and resets are rare next to deltas: encoding/json.
	for _, f := range [...]struct {
		name string
		v    any
		set  bool
	}{{`,"progress":`, ev.Progress, ev.Progress != nil}, {`,"yield":`, ev.Yield, ev.Yield != nil}, {`,"reset":`, ev.Reset, ev.Reset != nil}} {
		if !f.set {
			continue
		}
		raw, err := json.Marshal(f.v)
		if err != nil {
			return b, err
		}
		b = append(append(b, f.name...), raw...)
	}
	return append(b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping like encoding/json
// (control characters, quotes, backslashes, <, >, &, U+2028 and U+2029;
// invalid UTF-8 becomes U+FFFD).
func appendString(b []byte, s string) []byte {
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
	return append(b, '"')
}
