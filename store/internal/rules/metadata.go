package rules

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// MetadataTerm is one key of a session list's metadata filter, checked and
// typed: Type is "text", "number", "true", "false" or "null"; Text or Number
// holds the value of the first two.
type MetadataTerm struct {
	Key    string
	Type   string
	Text   string
	Number float64
	JSON   []byte // the value as compact JSON
}

// MetadataFilter checks the metadata filter of a session list and returns
// its terms in key order: every value must be a string, a number, a
// boolean or null (a filter on objects or arrays would compare differently
// from driver to driver).
func MetadataFilter(p *store.SessionListParams) ([]MetadataTerm, error) {
	if len(p.Metadata) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(p.Metadata))
	for k := range p.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	terms := make([]MetadataTerm, 0, len(keys))
	for _, k := range keys {
		b, err := json.Marshal(p.Metadata[k])
		if err != nil {
			return nil, Invalid("metadata filter %q: %v", k, err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, Invalid("metadata filter %q: %v", k, err)
		}
		t := MetadataTerm{Key: k, JSON: b}
		switch x := v.(type) {
		case string:
			t.Type, t.Text = "text", x
		case float64:
			t.Type, t.Number = "number", x
		case bool:
			t.Type = "false"
			if x {
				t.Type = "true"
			}
		case nil:
			t.Type = "null"
		default:
			return nil, Invalid("metadata filter %q: want a string, number, boolean or null, not %s", k, b)
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// MatchMetadata reports whether a session's metadata (a JSON object) has
// every term's key with an equal value.
func MatchMetadata(meta json.RawMessage, terms []MetadataTerm) bool {
	if len(terms) == 0 {
		return true
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil || m == nil {
		return false
	}
	for _, t := range terms {
		v, ok := m[t.Key]
		if !ok {
			return false
		}
		switch x := v.(type) {
		case string:
			ok = t.Type == "text" && x == t.Text
		case float64:
			ok = t.Type == "number" && x == t.Number
		case bool:
			ok = (t.Type == "true") == x && (t.Type == "true" || t.Type == "false")
		case nil:
			ok = t.Type == "null"
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return true
}

// MergeMetadata applies patch, a JSON object, to a session's metadata at
// the top level: each key of patch replaces the one of meta, a null value
// removes it. Metadata that is not an object is replaced by the patch's
// non-null keys.
func MergeMetadata(meta, patch json.RawMessage) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return nil, Invalid("session metadata patch must be a JSON object")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	for k, v := range p {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, Invalid("session metadata patch: %v", err)
	}
	return out, nil
}

// UpdateSession applies p to a copy of sess (the current row) and returns
// it: the merged metadata, the title, and UpdatedAt (never earlier than
// the row's).
func UpdateSession(sess *steptype.Session, p *store.SessionUpdateParams) (*steptype.Session, error) {
	u := CloneSession(sess)
	if p.Metadata != nil {
		m, err := MergeMetadata(u.Metadata, p.Metadata)
		if err != nil {
			return nil, err
		}
		u.Metadata = m
	}
	if p.Title != nil {
		u.Title = *p.Title
	}
	if now := Now(p.Now); now.After(u.UpdatedAt) {
		u.UpdatedAt = now
	}
	return u, nil
}

// CheckSessionUpdate checks the parameters of SessionUpdate before the row
// is read.
func CheckSessionUpdate(p *store.SessionUpdateParams) error {
	if p == nil || p.ID == "" {
		return Invalid("session id is required")
	}
	if p.Metadata != nil {
		if _, err := MergeMetadata(nil, p.Metadata); err != nil {
			return err
		}
	}
	return nil
}
