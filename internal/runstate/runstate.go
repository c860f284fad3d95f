// Package runstate is the state of a run: a JSON object that steps update
// with RFC 7386 merge patches, or key by key with per-key reducers, and
// the merge patch each update amounts to, which its step records.
package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
)

// MergePatch applies an RFC 7386 JSON merge patch to doc and returns the
// result. A nil or empty doc is treated as {}. A patch that is not an object
// replaces doc entirely, as the RFC says.
func MergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	if len(patch) == 0 {
		return doc, nil
	}
	var p any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("state patch: %w", err)
	}
	var d any
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
	}
	out, err := json.Marshal(mergeValue(d, p))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return out, nil
}

func mergeValue(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergeValue(dm[k], v)
	}
	return dm
}

// Reducer combines the current value of a run-state key with an update of
// it (a per-key state reducer). current is nil when the key is absent;
// update is never JSON null (null deletes the key whatever its reducer).
// The result becomes the key's value.
type Reducer interface {
	Reduce(current, update json.RawMessage) (json.RawMessage, error)
}

// ReducerFunc adapts a function to a Reducer.
type ReducerFunc func(current, update json.RawMessage) (json.RawMessage, error)

// Reduce calls f.
func (f ReducerFunc) Reduce(current, update json.RawMessage) (json.RawMessage, error) {
	return f(current, update)
}

// The built-in reducers, by the names agent files use.
var (
	// ReduceReplace sets the key to the update (an object is not merged).
	ReduceReplace Reducer = namedReducer{"replace", func(_, u json.RawMessage) (json.RawMessage, error) { return u, nil }}
	// ReduceAppend appends to a list: an array update adds its elements,
	// any other value is added as one element.
	ReduceAppend Reducer = namedReducer{"append", reduceAppend}
	// ReduceMerge merges the update into the current value (RFC 7386), the
	// behaviour of keys without a reducer.
	ReduceMerge Reducer = namedReducer{"merge", MergePatch}
	// ReduceSum adds numbers.
	ReduceSum Reducer = namedReducer{"sum", reduceSum}
)

// Reducers lists the built-in reducers by name.
var Reducers = map[string]Reducer{"replace": ReduceReplace, "append": ReduceAppend, "merge": ReduceMerge, "sum": ReduceSum}

type namedReducer struct {
	name string
	fn   func(current, update json.RawMessage) (json.RawMessage, error)
}

func (r namedReducer) Reduce(c, u json.RawMessage) (json.RawMessage, error) { return r.fn(c, u) }

// String returns the reducer's name.
func (r namedReducer) String() string { return r.name }

func reduceAppend(current, update json.RawMessage) (json.RawMessage, error) {
	var list []json.RawMessage
	if len(current) > 0 && string(current) != "null" {
		if err := json.Unmarshal(current, &list); err != nil {
			return nil, errors.New("append: the current value is not a list")
		}
	}
	var more []json.RawMessage
	if err := json.Unmarshal(update, &more); err != nil {
		more = []json.RawMessage{update}
	}
	return json.Marshal(append(list, more...))
}

func reduceSum(current, update json.RawMessage) (json.RawMessage, error) {
	var a, b json.Number
	if len(current) > 0 {
		if err := json.Unmarshal(current, &a); err != nil {
			return nil, errors.New("sum: the current value is not a number")
		}
	}
	if err := json.Unmarshal(update, &b); err != nil {
		return nil, errors.New("sum: the update is not a number")
	}
	if ai, err := a.Int64(); err == nil || a == "" {
		if bi, err := b.Int64(); err == nil {
			return json.Marshal(ai + bi)
		}
	}
	af, _ := a.Float64()
	bf, _ := b.Float64()
	return json.Marshal(af + bf)
}

// Apply applies a state update to the run state: each top-level key
// with a reducer is combined by it, the others are merged (RFC 7386). It
// returns the new state and the merge patch that turns the old state into
// it, which is what the step records.
func Apply(reducers map[string]Reducer, state, update json.RawMessage) (json.RawMessage, json.RawMessage, error) {
	if len(reducers) == 0 {
		next, err := MergePatch(state, update)
		return next, update, err
	}
	var upd map[string]json.RawMessage
	if err := json.Unmarshal(update, &upd); err != nil {
		return nil, nil, fmt.Errorf("state update: an agent with reducers takes an object: %w", err)
	}
	cur := map[string]json.RawMessage{}
	if len(state) > 0 && string(state) != "null" {
		if err := json.Unmarshal(state, &cur); err != nil {
			return nil, nil, fmt.Errorf("state: %w", err)
		}
	}
	keys := make([]string, 0, len(upd))
	for k := range upd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	patch := map[string]any{}
	for _, k := range keys {
		u := upd[k]
		old, had := cur[k]
		var val json.RawMessage
		switch r, ok := reducers[k]; {
		case string(u) == "null":
			if had {
				patch[k] = nil
				delete(cur, k)
			}
			continue
		case ok:
			var err error
			if val, err = r.Reduce(old, u); err != nil {
				return nil, nil, fmt.Errorf("state key %q: %w", k, err)
			}
		default:
			var err error
			if val, err = MergePatch(old, u); err != nil {
				return nil, nil, fmt.Errorf("state key %q: %w", k, err)
			}
		}
		var ov, nv any
		if had {
			_ = json.Unmarshal(old, &ov)
		}
		if err := json.Unmarshal(val, &nv); err != nil {
			return nil, nil, fmt.Errorf("state key %q: reducer result: %w", k, err)
		}
		if had && reflect.DeepEqual(ov, nv) {
			continue
		}
		patch[k] = diffPatch(ov, nv, had)
		cur[k] = val
	}
	next, err := json.Marshal(cur)
	if err != nil {
		return nil, nil, err
	}
	p, err := json.Marshal(patch)
	return next, p, err
}

// diffPatch is the merge patch turning old into new.
func diffPatch(old, new any, had bool) any {
	om, ok1 := old.(map[string]any)
	nm, ok2 := new.(map[string]any)
	if !had || !ok1 || !ok2 {
		return new
	}
	p := map[string]any{}
	for k := range om {
		if _, ok := nm[k]; !ok {
			p[k] = nil
		}
	}
	for k, v := range nm {
		o, ok := om[k]
		if ok && reflect.DeepEqual(o, v) {
			continue
		}
		p[k] = diffPatch(o, v, ok)
	}
	return p
}

// ToRaw is the JSON of v: v itself when it is JSON already (checked).
func ToRaw(v any) (json.RawMessage, error) {
	switch t := v.(type) {
	case json.RawMessage:
		if !json.Valid(t) {
			return nil, errors.New("invalid JSON")
		}
		return t, nil
	case []byte:
		if !json.Valid(t) {
			return nil, errors.New("invalid JSON")
		}
		return t, nil
	}
	return json.Marshal(v)
}
