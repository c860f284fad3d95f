package steptype

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/internal/jsonstr"
)

// appendWire appends the version-1 wire format of s to b, byte for byte
// what encoding/json writes for s.toWire(), without reflection. ok is
// false when s holds something it leaves to encoding/json: a value that
// does not encode (a raw message that is not JSON, a NaN, a time outside
// RFC 3339), whose error encoding/json must report. b may then
// hold a partial encoding past its original length. It clears *v when
// what it wrote is not s verbatim (AppendJSONVerbatim), and leaves it as
// it was otherwise.
func (s *Step) appendWire(b []byte, v *bool) (_ []byte, ok bool) {
	if !s.Annotations.IsZero() || (s.ToolCalls != nil && len(s.ToolCalls) == 0) || (s.Vector != nil && len(s.Vector) == 0) ||
		(s.Metadata != nil && len(s.Metadata) == 0) {
		*v = false
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, WireVersion, 10)
	b = appendKey(b, `,"id":`, s.ID, v)
	b = appendKey(b, `,"session_id":`, s.SessionID, v)
	b = appendKey(b, `,"run_id":`, s.RunID, v)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, s.Sequence, 10)
	b = appendOmit(b, `,"parent_id":`, s.ParentID, v)
	b = append(b, `,"hop":`...)
	b = strconv.AppendInt(b, int64(s.Hop), 10)
	b = appendKey(b, `,"kind":`, string(s.Kind), v)
	b = appendOmit(b, `,"name":`, s.Name, v)
	b = appendKey(b, `,"status":`, string(s.Status), v)
	b = appendOmit(b, `,"role":`, string(s.Role), v)
	b = appendOmit(b, `,"content":`, s.Content, v)
	b = appendOmit(b, `,"reasoning":`, s.Reasoning, v)
	if len(s.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range s.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendKey(b, `{"id":`, c.ID, v)
			b = appendKey(b, `,"name":`, c.Name, v)
			b = append(b, `,"arguments":`...)
			if c.Arguments == nil {
				*v = false // decoded as the raw null, not nil
				b = append(b, "null"...)
			} else if b, ok = appendRaw(b, c.Arguments, v); !ok {
				return b, false
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendOmit(b, `,"tool_call_id":`, s.ToolCallID, v)
	b = appendOmit(b, `,"tool_name":`, s.ToolName, v)
	for _, f := range [...]struct {
		key string
		raw json.RawMessage
	}{{`,"inputs":`, s.Inputs}, {`,"outputs":`, s.Outputs}, {`,"state_patch":`, s.StatePatch}} {
		if len(f.raw) > 0 {
			if b, ok = appendRaw(append(b, f.key...), f.raw, v); !ok {
				return b, false
			}
		} else if f.raw != nil {
			*v = false // empty, not nil: left out, decoded as nil
		}
	}
	if e := s.Error; e != nil {
		b = appendKey(b, `,"error":{"message":`, e.Message, v)
		b = appendOmit(b, `,"cause":`, e.Cause, v)
		b = appendOmit(b, `,"class":`, string(e.Class), v)
		b = appendInt(b, `,"attempt":`, int64(e.Attempt))
		b = append(b, `,"recoverable":`...)
		b = strconv.AppendBool(b, e.Recoverable)
		b = appendOmit(b, `,"code":`, e.Code, v)
		b = append(b, '}')
	}
	if s.Metrics != (Metrics{}) {
		if b, ok = s.Metrics.appendWire(append(b, `,"metrics":`...), v); !ok {
			return b, false
		}
	}
	if a := s.Annotations; !a.IsZero() {
		b = append(b, `,"annotations":`...)
		n := len(b)
		b = appendOmit(b, `,"state":`, a.State, v)
		b = appendOmit(b, `,"state_summary":`, a.StateSummary, v)
		b = appendOmit(b, `,"goal":`, a.Goal, v)
		b = appendOmit(b, `,"goal_summary":`, a.GoalSummary, v)
		b = appendOmit(b, `,"action":`, a.Action, v)
		b = appendOmit(b, `,"action_summary":`, a.ActionSummary, v)
		b[n] = '{' // the first field's comma
		b = append(b, '}')
	}
	if len(s.Vector) > 0 {
		b = append(b, `,"vector":[`...)
		for i, f := range s.Vector {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendFloat(b, float64(f), 32); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	b = appendOmit(b, `,"embedder":`, s.Embedder, v)
	b = appendOmit(b, `,"replay":`, s.Replay, v)
	b = appendOmit(b, `,"fingerprint":`, s.Fingerprint, v)
	if p := s.Progress; p != nil {
		b = append(b, `,"progress":{`...)
		n := len(b)
		if p.Fraction != nil {
			if b, ok = appendFloat(append(b, `"fraction":`...), *p.Fraction, 64); !ok {
				return b, false
			}
		}
		if p.Message != "" {
			if len(b) > n {
				b = append(b, ',')
			}
			b = appendKey(b, `"message":`, p.Message, v)
		}
		b = append(b, '}')
	}
	if len(s.Metadata) > 0 {
		n := len(b)
		if b, ok = appendAny(append(b, `,"metadata":`...), s.Metadata, 0, v); !ok {
			// Other values: encoding/json's own encoding of the map, as
			// inside the struct.
			m, err := json.Marshal(s.Metadata)
			if err != nil {
				return b, false
			}
			*v = false
			b = append(append(b[:n], `,"metadata":`...), m...)
		}
	}
	if b, ok = appendTime(append(b, `,"created_at":`...), s.CreatedAt); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendWire appends the wire form of non-zero metrics (metricsWire).
func (m *Metrics) appendWire(b []byte, v *bool) (_ []byte, ok bool) {
	n := len(b)
	if !m.StartedAt.IsZero() {
		if b, ok = appendTime(append(b, `,"started_at":`...), m.StartedAt); !ok {
			return b, false
		}
	}
	if !m.FinishedAt.IsZero() {
		if b, ok = appendTime(append(b, `,"finished_at":`...), m.FinishedAt); !ok {
			return b, false
		}
	}
	b = appendInt(b, `,"duration_us":`, m.Duration.Microseconds())
	b = appendInt(b, `,"first_token_latency_us":`, m.FirstTokenLatency.Microseconds())
	b = appendInt(b, `,"input_tokens":`, m.InputTokens)
	b = appendInt(b, `,"output_tokens":`, m.OutputTokens)
	b = appendInt(b, `,"cached_tokens":`, m.CachedTokens)
	b = appendInt(b, `,"reasoning_tokens":`, m.ReasoningTokens)
	if m.Cost != 0 {
		if b, ok = appendFloat(append(b, `,"cost":`...), m.Cost, 64); !ok {
			return b, false
		}
	}
	b = appendOmit(b, `,"model":`, m.Model, v)
	b = appendOmit(b, `,"provider":`, m.Provider, v)
	b = appendInt(b, `,"attempt":`, int64(m.Attempt))
	b = appendInt(b, `,"cpu_time_ns":`, m.CPUTime.Nanoseconds())
	b = appendInt(b, `,"alloc_bytes":`, m.AllocBytes)
	b = appendInt(b, `,"alloc_objects":`, m.AllocObjects)
	b = appendInt(b, `,"overlapping_steps":`, int64(m.OverlappingSteps))
	if len(b) == n {
		// Non-zero metrics whose every wire field is empty (a duration
		// under a microsecond): an empty object, as encoding/json writes.
		return append(b, "{}"...), true
	}
	b[n] = '{' // the first field's comma
	return append(b, '}'), true
}

// appendAny appends v as encoding/json does when v holds only the types
// JSON decodes to (nil, bool, float64, string, []any, map[string]any) and
// Go integers, nested at most 8 deep; ok is false for anything else. It
// clears *vb when what it wrote does not decode to v (an integer, a nil
// slice or map, text that is not valid UTF-8).
func appendAny(b []byte, v any, depth int, vb *bool) (_ []byte, ok bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		b, ok = jsonstr.AppendValid(b, v)
		if !ok {
			*vb = false
		}
		return b, true
	case bool:
		return strconv.AppendBool(b, v), true
	case float64:
		return appendFloat(b, v, 64)
	case int:
		*vb = false
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		*vb = false
		return strconv.AppendInt(b, v, 10), true
	case []any:
		if v == nil {
			*vb = false
			return append(b, "null"...), true
		}
		if depth >= 8 {
			return b, false
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendAny(b, x, depth+1, vb); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if v == nil {
			*vb = false
			return append(b, "null"...), true
		}
		if depth >= 8 {
			return b, false
		}
		var buf [8]string
		keys := buf[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // encoding/json's order: the keys' bytes
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = jsonstr.AppendValid(b, k); !ok {
				*vb = false
			}
			if b, ok = appendAny(append(b, ':'), v[k], depth+1, vb); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendKey appends key (with its punctuation) and s as a JSON string,
// and clears *v when s is not valid UTF-8 (verbatim).
func appendKey(b []byte, key, s string, v *bool) []byte {
	b, ok := jsonstr.AppendValid(append(b, key...), s)
	if !ok {
		*v = false
	}
	return b
}

// appendOmit is appendKey for an omitempty string: nothing when s is empty.
func appendOmit(b []byte, key, s string, v *bool) []byte {
	if s == "" {
		return b
	}
	return appendKey(b, key, s, v)
}

// appendInt appends key and an omitempty integer: nothing when it is 0.
func appendInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

// appendTime appends t as time.Time's MarshalJSON does; ok is false when
// it has no RFC 3339 form (MarshalJSON's error).
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	b, err := t.AppendText(append(b, '"'))
	return append(b, '"'), err == nil
}

// appendFloat appends f as encoding/json does (ES6 number formatting);
// ok is false for NaN and infinities, which it refuses.
func appendFloat(b []byte, f float64, bits int) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendRaw appends a raw JSON value as encoding/json does for a
// json.RawMessage: compacted, with <, >, &, U+2028 and U+2029 escaped
// inside strings; ok is false when raw is not valid JSON. It clears *v
// unless raw is written as it is and is valid UTF-8.
func appendRaw(b []byte, raw []byte, v *bool) ([]byte, bool) {
	if compactAsIs(raw) {
		if !utf8.Valid(raw) {
			*v = false
		}
		return append(b, raw...), true
	}
	*v = false
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, false
	}
	out := buf.Bytes()
	if !needsHTMLEscape(out[len(b):]) {
		return out, true
	}
	esc := bytes.NewBuffer(out[:len(b):len(b)])
	json.HTMLEscape(esc, out[len(b):])
	return esc.Bytes(), true
}

// compactAsIs reports whether encoding/json writes raw unchanged: valid
// JSON with no white space to compact and nothing to escape (the common
// case: arguments and outputs the engine compacted when it stored them).
func compactAsIs(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return !needsHTMLEscape(raw) && json.Valid(raw)
}

// needsHTMLEscape reports whether compacted JSON holds a byte that
// encoding/json escapes inside strings: <, >, &, or the lead byte of
// U+2028 and U+2029.
func needsHTMLEscape(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}
