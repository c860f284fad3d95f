package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// aguiPatchOp is one RFC 6902 JSON Patch operation of a STATE_DELTA.
type aguiPatchOp struct {
	Op    string `json:"op"` // add, remove, replace
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON keeps "value" on add and replace even when it is null or
// false (omitempty would drop it), and leaves it out of remove.
func (o aguiPatchOp) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// stateDelta returns the JSON Patch that turns the state before into the
// state after (both JSON; empty or null is {}): objects are compared key by
// key, in key order, and any other change replaces the value whole.
func stateDelta(before, after json.RawMessage) ([]aguiPatchOp, error) {
	var a, b any = map[string]any{}, map[string]any{}
	if len(before) > 0 && string(before) != "null" {
		if err := json.Unmarshal(before, &a); err != nil {
			return nil, err
		}
	}
	if len(after) > 0 && string(after) != "null" {
		if err := json.Unmarshal(after, &b); err != nil {
			return nil, err
		}
	}
	ops := []aguiPatchOp{}
	diffJSON("", a, b, &ops)
	return ops, nil
}

func diffJSON(path string, a, b any, ops *[]aguiPatchOp) {
	ao, aok := a.(map[string]any)
	bo, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			*ops = append(*ops, aguiPatchOp{Op: "replace", Path: path, Value: b})
		}
		return
	}
	keys := make([]string, 0, len(ao)+len(bo))
	for k := range ao {
		keys = append(keys, k)
	}
	for k := range bo {
		if _, ok := ao[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + pointerEscape.Replace(k)
		av, inA := ao[k]
		bv, inB := bo[k]
		switch {
		case !inB:
			*ops = append(*ops, aguiPatchOp{Op: "remove", Path: p})
		case !inA:
			*ops = append(*ops, aguiPatchOp{Op: "add", Path: p, Value: bv})
		default:
			diffJSON(p, av, bv, ops)
		}
	}
}

// pointerEscape escapes a key as a JSON Pointer token (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")
