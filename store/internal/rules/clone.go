package rules

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// CloneStep returns a deep copy of s: no slice, map or raw JSON of the copy
// is shared with s, so a stored row cannot be changed through a caller's
// pointer and vice versa. It is the in-memory driver's substitute for an
// encode/decode round trip, at a fraction of the cost.
func CloneStep(s *steptype.Step) *steptype.Step {
	c := *s
	if s.ToolCalls != nil {
		c.ToolCalls = make([]steptype.ToolCall, len(s.ToolCalls))
		for i, tc := range s.ToolCalls {
			tc.Arguments = cloneRaw(tc.Arguments)
			c.ToolCalls[i] = tc
		}
	}
	c.Inputs, c.Outputs, c.StatePatch = cloneRaw(s.Inputs), cloneRaw(s.Outputs), cloneRaw(s.StatePatch)
	if s.Error != nil {
		e := *s.Error
		c.Error = &e
	}
	c.Vector = slices.Clone(s.Vector)
	c.Metadata = CloneMetadata(s.Metadata)
	return &c
}

// CloneMetadata returns a deep copy of a step's metadata (nil stays nil).
func CloneMetadata(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return cloneValue(m).(map[string]any)
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

// cloneValue deep-copies a JSON-like value (maps, slices, scalars).
func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if scalarValues(t) {
			return maps.Clone(t) // copies the table as is: no hashing
		}
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = cloneValue(x)
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = cloneValue(x)
		}
		return out
	case json.RawMessage:
		return cloneRaw(t)
	}
	return v
}

// scalarValues reports whether every value of m is immutable (nil, a
// string, a number or a bool), so that a shallow copy of m is a deep one.
func scalarValues(m map[string]any) bool {
	for _, v := range m {
		switch v.(type) {
		case nil, string, float64, bool, int, int64:
		default:
			return false
		}
	}
	return true
}

// HandOver returns a step given to StepAppend with InPlace as the stored
// row it became: normalized as every stored step is, with the sequence and
// creation time it was placed with (changed in place).
func HandOver(in *steptype.Step, seq int64, created time.Time) *steptype.Step {
	in = NormalizeStep(in)
	in.Sequence, in.CreatedAt = seq, created
	return in
}

// NormalizeStep makes s look as if it had been through the wire format:
// durations in whole microseconds, times in UTC without a monotonic
// reading, metadata as decoded JSON. It changes s in place and returns it.
func NormalizeStep(s *steptype.Step) *steptype.Step {
	m := &s.Metrics
	m.Duration = m.Duration.Truncate(time.Microsecond)
	m.FirstTokenLatency = m.FirstTokenLatency.Truncate(time.Microsecond)
	m.StartedAt, m.FinishedAt = wireTime(m.StartedAt), wireTime(m.FinishedAt)
	s.CreatedAt = wireTime(s.CreatedAt)
	s.Metadata = NormalizeMetadata(s.Metadata)
	return s
}

// NormalizeMetadata returns a step's metadata as decoded JSON, as
// NormalizeStep leaves it: m itself when it holds only what JSON decodes
// into (or does not encode), else a new map from its JSON round trip.
func NormalizeMetadata(m map[string]any) map[string]any {
	if m != nil && !jsonNative(m) {
		if b, err := json.Marshal(m); err == nil {
			var back map[string]any
			if json.Unmarshal(b, &back) == nil {
				return back
			}
		}
	}
	return m
}

func wireTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Round(0)
}

// jsonNative reports whether v holds only what encoding/json decodes into
// (strings, float64, bools, nil, maps and slices of those), so a JSON round
// trip would not change it.
func jsonNative(v any) bool {
	switch t := v.(type) {
	case nil, string, float64, bool:
		return true
	case map[string]any:
		for _, x := range t {
			if !jsonNative(x) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range t {
			if !jsonNative(x) {
				return false
			}
		}
		return true
	}
	return false
}
