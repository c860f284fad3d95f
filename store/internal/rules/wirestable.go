package rules

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/steptype"
)

// WireStable reports whether s would come back from its wire JSON equal
// to NormalizeStep(CloneStep(s)): its raw JSON is already compact and free of
// what encoding/json escapes (<, >, &), its text is valid UTF-8, no slice is
// empty but non-nil, and it has no annotations. A driver may then return the
// normalized copy of what it stored instead of decoding the body it just
// encoded; when false it must decode. A step's encoder tells the same
// while it writes (steptype.Step.AppendJSONVerbatim, PreEncoded.Verbatim).
func WireStable(s *steptype.Step) bool {
	if !s.Annotations.IsZero() || (s.ToolCalls != nil && len(s.ToolCalls) == 0) ||
		(s.Vector != nil && len(s.Vector) == 0) {
		return false
	}
	for _, r := range [...]json.RawMessage{s.Inputs, s.Outputs, s.StatePatch} {
		if !rawStable(r) {
			return false
		}
	}
	for _, tc := range s.ToolCalls {
		// Nil arguments are written as null, which decodes as the raw null.
		if tc.Arguments == nil || !rawStable(tc.Arguments) || !utf8.ValidString(tc.ID) || !utf8.ValidString(tc.Name) {
			return false
		}
	}
	for _, t := range [...]string{s.Name, s.Content, s.Reasoning, s.ToolCallID, s.ToolName, s.Embedder, s.Replay,
		s.Fingerprint, s.Metrics.Model, s.Metrics.Provider} {
		if !utf8.ValidString(t) {
			return false
		}
	}
	if e := s.Error; e != nil && (!utf8.ValidString(e.Message) || !utf8.ValidString(e.Cause) || !utf8.ValidString(e.Code)) {
		return false
	}
	return s.Metadata == nil || (len(s.Metadata) > 0 && textStable(s.Metadata))
}

// rawStable reports whether raw JSON is nil, or non-empty and free of the
// bytes encoding/json would compact or escape: white space, <, >, & and
// the lead byte of U+2028 and U+2029 (0xE2, which other characters share:
// they are rare), which it writes as \u2028 and \u2029.
func rawStable(b json.RawMessage) bool {
	if b == nil {
		return true
	}
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

// textStable reports whether a decoded-JSON-like value holds only what a
// round trip keeps as is: JSON-native values with valid UTF-8 text (a nil
// map or slice, written as null, decodes as nil).
func textStable(v any) bool {
	switch t := v.(type) {
	case nil, float64, bool:
		return true
	case string:
		return utf8.ValidString(t)
	case map[string]any:
		if t == nil {
			return false
		}
		for k, x := range t {
			if !utf8.ValidString(k) || !textStable(x) {
				return false
			}
		}
		return true
	case []any:
		if t == nil {
			return false
		}
		for _, x := range t {
			if !textStable(x) {
				return false
			}
		}
		return true
	}
	return false
}
